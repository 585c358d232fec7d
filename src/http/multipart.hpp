// http/multipart — reads a multipart/form-data body (RFC 7578) far enough to route and check it: the
// boundary from the Content-Type, each part's name, filename and Content-Type, and a view of its bytes. The
// body itself is forwarded to the engine untouched. Header parameters are read with Beast's param_list;
// a malformed body throws broker::Error(invalid_request) saying what is wrong (fuzzed:
// fuzz/fuzz_openai_request.cpp).
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace loch::http {

struct FormPart {
    std::string name;
    std::optional<std::string> filename;  // present for a file upload
    std::string content_type;             // the part's own, "" when not given
    std::string_view value;               // into the body
};

// The boundary of a "multipart/form-data; boundary=…" Content-Type; nullopt when it is not one.
std::optional<std::string> form_boundary(std::string_view content_type);

// Every part, in order. Throws broker::Error(invalid_request).
std::vector<FormPart> read_form(std::string_view body, std::string_view boundary);

}  // namespace loch::http
