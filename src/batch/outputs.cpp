#include "batch/outputs.hpp"
#include "core/json_text.hpp"

#include <fstream>
#include <stdexcept>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

namespace loch::batch {

namespace fs = std::filesystem;

namespace {

// A result as one JSON value on one line: the answer's own text when it is (loch and the engines answer
// compactly), else re-serialized, else kept as a string.
std::string one_line_json(const std::string& text) {
    if (text.empty()) return "null";
    if (text.find('\n') == std::string::npos && nlohmann::json::accept(text)) return text;
    auto j = nlohmann::json::parse(text, nullptr, false);
    if (j.is_discarded()) return core::json_text(nlohmann::json(text));
    return core::json_text(j);
}

std::string quoted(const std::string& s) {
    return core::json_text(nlohmann::json(s));
}

class AsideFile {
  public:
    explicit AsideFile(fs::path final) : final_(std::move(final)), part_(final_.string() + ".part") {
        out_.open(part_, std::ios::binary | std::ios::trunc);
        if (!out_) throw std::runtime_error("cannot write " + part_.string());
    }
    ~AsideFile() {
        std::error_code ec;
        if (!done_) fs::remove(part_, ec);
    }
    void line(const std::string& text) {
        out_ << text << '\n';
        ++lines_;
        bytes_ += text.size() + 1;
    }
    void commit() {
        out_.close();
        if (!out_) throw std::runtime_error("cannot write " + part_.string());
        fs::rename(part_, final_);
        done_ = true;
    }
    std::uint64_t lines() const { return lines_; }
    std::uint64_t bytes() const { return bytes_; }

  private:
    fs::path final_, part_;
    std::ofstream out_;
    std::uint64_t lines_ = 0, bytes_ = 0;
    bool done_ = false;
};

}  // namespace

std::string item_request_id(const std::string& batch_id, std::int64_t line, int attempt) {
    return fmt::format("{}-{}.{}", batch_id, line, attempt);
}

OutputFigures write_outputs(const Store& reader, const std::string& batch_id, const fs::path& output,
                            const fs::path& errors, const std::string& unfinished_code,
                            const std::string& unfinished_message) {
    AsideFile out(output), err(errors);
    const std::string suffix = batch_id.substr(batch_id.find('_') + 1);
    reader.each_item(batch_id, [&](const ItemRecord& i) {
        const std::string head =
            fmt::format(R"({{"id":"batch_req_{}_{}","custom_id":{},)", suffix, i.line, quoted(i.custom_id));
        const std::string response =
            i.status_code > 0
                ? fmt::format(R"({{"status_code":{},"request_id":"{}","body":{}}})", i.status_code,
                              item_request_id(batch_id, i.line, i.attempts), one_line_json(i.result))
                : "null";
        switch (i.state) {
            case ItemState::done:
                out.line(head + R"("response":)" + response + R"(,"error":null})");
                break;
            case ItemState::failed:
                err.line(head + R"("response":)" + response + R"(,"error":)" +
                         (i.error.empty() ? nlohmann::json{{"code", "request_failed"},
                                                           {"message", fmt::format("HTTP {}", i.status_code)}}
                                                .dump()
                                          : one_line_json(i.error)) +
                         "}");
                break;
            case ItemState::queued:
            case ItemState::running:
                err.line(head + R"("response":null,"error":)" +
                         nlohmann::json{{"code", unfinished_code}, {"message", unfinished_message}}.dump() +
                         "}");
                break;
        }
    });
    out.commit();
    err.commit();
    return {out.lines(), out.bytes(), err.lines(), err.bytes()};
}

}  // namespace loch::batch
