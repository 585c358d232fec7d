#include "http/multipart.hpp"

#include <algorithm>
#include <cctype>

#include <boost/beast/http/rfc7230.hpp>

#include "broker/error.hpp"

namespace loch::http {

namespace {

namespace bhttp = boost::beast::http;
using broker::Error;
using broker::ErrorKind;

[[noreturn]] void bad_form(const std::string& why) {
    throw Error(ErrorKind::invalid_request, "multipart/form-data body: " + why);
}

bool iequals(std::string_view a, std::string_view b) {
    return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
               return std::tolower(static_cast<unsigned char>(x)) ==
                      std::tolower(static_cast<unsigned char>(y));
           });
}

std::string_view trim(std::string_view s) {
    while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
    while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
    return s;
}

// A parameter value as param_list gives it: a token, or a quoted string with its quotes and escapes.
std::string unquote(std::string_view v) {
    if (v.size() < 2 || v.front() != '"' || v.back() != '"') return std::string(v);
    std::string out;
    for (std::size_t i = 1; i + 1 < v.size(); ++i) {
        if (v[i] == '\\' && i + 2 < v.size()) ++i;
        out.push_back(v[i]);
    }
    return out;
}

// "<type>; a=b; c="d"": the type, and the parameters through Beast's RFC 7230 list reader.
std::string_view media_type(std::string_view header, std::string_view& params) {
    const auto semi = header.find(';');
    params = semi == std::string_view::npos ? std::string_view() : header.substr(semi);
    return trim(header.substr(0, semi));
}

void read_part_headers(std::string_view headers, FormPart& p) {
    bool disposition = false;
    while (!headers.empty()) {
        const auto eol = headers.find("\r\n");
        const auto line = headers.substr(0, eol);
        headers = eol == std::string_view::npos ? std::string_view() : headers.substr(eol + 2);
        if (line.empty()) continue;
        const auto colon = line.find(':');
        if (colon == std::string_view::npos) bad_form("a part header without ':'");
        const auto name = trim(line.substr(0, colon)), value = trim(line.substr(colon + 1));
        std::string_view params;
        if (iequals(name, "Content-Disposition")) {
            if (!iequals(media_type(value, params), "form-data")) bad_form("a part that is not form-data");
            disposition = true;
            for (const auto& param : bhttp::param_list(params)) {
                if (iequals(param.first, "name")) p.name = unquote(param.second);
                if (iequals(param.first, "filename")) p.filename = unquote(param.second);
            }
        } else if (iequals(name, "Content-Type")) {
            p.content_type = std::string(value);
        }
    }
    if (!disposition || p.name.empty()) bad_form("a part without a Content-Disposition name");
}

}  // namespace

std::optional<std::string> form_boundary(std::string_view content_type) {
    std::string_view params;
    if (!iequals(media_type(content_type, params), "multipart/form-data")) return std::nullopt;
    for (const auto& param : bhttp::param_list(params))
        if (iequals(param.first, "boundary")) {
            auto b = unquote(param.second);
            // RFC 2046: 1–70 characters.
            if (b.empty() || b.size() > 70) return std::nullopt;
            return b;
        }
    return std::nullopt;
}

std::vector<FormPart> read_form(std::string_view body, std::string_view boundary) {
    const std::string delimiter = "--" + std::string(boundary);
    std::vector<FormPart> parts;
    auto at = body.find(delimiter);
    if (at == std::string_view::npos) bad_form("no boundary line");
    at += delimiter.size();
    const std::string next = "\r\n" + delimiter;
    for (;;) {
        if (body.substr(at, 2) == "--") return parts;  // the closing delimiter
        if (body.substr(at, 2) != "\r\n") bad_form("a boundary line not followed by CRLF");
        at += 2;
        const auto head_end = body.find("\r\n\r\n", at);
        if (head_end == std::string_view::npos) bad_form("a part whose headers do not end");
        FormPart p;
        read_part_headers(body.substr(at, head_end - at + 2), p);
        const auto data = head_end + 4;
        const auto end = body.find(next, data);
        if (end == std::string_view::npos) bad_form("a part without a closing boundary");
        p.value = body.substr(data, end - data);
        parts.push_back(std::move(p));
        if (parts.size() > 256) bad_form("more than 256 parts");
        at = end + next.size();
    }
}

}  // namespace loch::http
