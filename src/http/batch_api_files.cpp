// The Batch API's files (issue 29, docs/batches.md): POST /v1/files (multipart: purpose=batch, file), GET
// /v1/files, GET|DELETE /v1/files/{id}, GET /v1/files/{id}/content — in OpenAI's shapes, as its clients read
// them. An upload goes to `<batch_dir>/tmp` as it arrives; the whole file is checked (every problem by line
// number) before it is kept under `<batch_dir>/files/<id>` and recorded in the store. Nothing of it touches
// the disk on the loop thread: the body's pieces are written a MiB at a time, the check and the copy of the
// file part (seconds for a GiB) run, all on the worker pool (core/off_loop.hpp).
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <fstream>
#include <set>
#include <streambuf>
#include <system_error>

#include <fmt/format.h>
#include <boost/beast/http/file_body.hpp>
#include <boost/beast/http/read.hpp>
#include <boost/beast/http/write.hpp>

#include "batch/input_file.hpp"
#include "batch/runner.hpp"
#include "batch/store.hpp"
#include "core/file_sink.hpp"
#include "core/off_loop.hpp"
#include "core/time_text.hpp"
#include "http/batch_api.hpp"
#include "http/errors.hpp"
#include "http/multipart.hpp"
#include "http/respond.hpp"
#include "http/routes.hpp"

namespace loch::http {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace bhttp = boost::beast::http;
namespace fs = std::filesystem;
using broker::Error;
using broker::ErrorKind;

namespace {

// A file removed when it goes out of scope unless kept (an upload that was refused, or cut off).
struct TempFile {
    fs::path path;
    bool kept = false;
    ~TempFile() {
        std::error_code ec;
        if (!kept && !path.empty()) fs::remove(path, ec);
    }
};

// A file mapped read-only for the multipart reader and the check (a view, not a copy).
class MappedFile {
  public:
    explicit MappedFile(const fs::path& p) {
        fd_ = ::open(p.c_str(), O_RDONLY | O_CLOEXEC);
        struct stat st {};
        if (fd_ < 0 || ::fstat(fd_, &st) != 0)
            throw Error(ErrorKind::internal, "cannot read the upload back: " + p.string());
        size_ = static_cast<std::size_t>(st.st_size);
        if (size_ > 0) {
            data_ = ::mmap(nullptr, size_, PROT_READ, MAP_PRIVATE, fd_, 0);
            if (data_ == MAP_FAILED) {
                data_ = nullptr;
                throw Error(ErrorKind::internal, "cannot map the upload: " + p.string());
            }
        }
    }
    ~MappedFile() {
        if (data_) ::munmap(data_, size_);
        if (fd_ >= 0) ::close(fd_);
    }
    MappedFile(const MappedFile&) = delete;
    MappedFile& operator=(const MappedFile&) = delete;
    std::string_view view() const { return {static_cast<const char*>(data_), data_ ? size_ : 0}; }

  private:
    int fd_ = -1;
    void* data_ = nullptr;
    std::size_t size_ = 0;
};

// An istream's buffer over a view (the check reads the file part line by line).
struct ViewBuffer : std::streambuf {
    explicit ViewBuffer(std::string_view v) {
        char* p = const_cast<char*>(v.data());
        setg(p, p, p + v.size());
    }
};

// A full disk is the user's to fix, not a bug of loch's: 507 with the figures and where the room is needed.
[[noreturn]] void refuse_write(const std::system_error& e, const fs::path& path, std::uint64_t received) {
    const int err = e.code().value();
    if (err != ENOSPC && err != EDQUOT)
        throw Error(ErrorKind::internal, fmt::format("{}: {}", e.what(), e.code().message()));
    std::error_code ec;
    const auto space = fs::space(path.parent_path(), ec);
    const std::uint64_t free = ec ? 0 : space.available;
    throw Error(
        ErrorKind::insufficient_storage,
        fmt::format("no room left for the upload on the disk of {} ({} bytes of it received, {} bytes free "
                    "there): free some space there, or point state_dir in loch.yaml (the Batch API "
                    "keeps its files under <state_dir>/batches) to a larger disk",
                    path.parent_path().string(), received, free),
        {{"received_bytes", received}, {"free_bytes", free}, {"path", path.parent_path().string()}});
}

nlohmann::json file_json(const batch::FileRecord& f) {
    return {{"id", f.id},
            {"object", "file"},
            {"bytes", f.bytes},
            {"created_at", f.created_at},
            {"filename", f.filename},
            {"purpose", f.purpose},
            {"status", "processed"},
            {"expires_at", nullptr},
            {"status_details", nullptr}};
}

}  // namespace

bool BatchApi::is_file_upload(const Request& req) {
    const std::string_view target = req.target();
    return req.method() == bhttp::verb::post && target.substr(0, target.find('?')) == "/v1/files";
}

batch::Store& BatchApi::store_or_refuse() {
    if (!runner_)
        throw Error(ErrorKind::not_found, "this loch has no Batch API (no state directory for its files)");
    return runner_->store();
}

asio::awaitable<bool> BatchApi::receive_upload(beast::tcp_stream& stream, beast::flat_buffer& buffer,
                                               bhttp::request_parser<bhttp::string_body>& parser) {
    const auto started = std::chrono::steady_clock::now();
    auto& req = parser.get();
    observe::RequestRecord rec;
    rec.id = journal_.id_of(req);
    rec.route = "POST /v1/files";
    const unsigned v = req.version();
    std::optional<Error> err;
    nlohmann::json answer;
    bool complete = false;
    try {
        // The key before the body: nobody streams gigabytes into loch without one.
        if (!authorized(req[bhttp::field::authorization], options_.api_keys))
            throw Error(ErrorKind::unauthorized,
                        "missing or wrong API key: send 'Authorization: Bearer <key>'");
        store_or_refuse();  // the store and its folders exist
        TempFile upload{options_.batch_dir / "tmp" / (batch::Store::new_id("upload-") + ".part")};
        std::uint64_t received = req.body().size();
        try {
            // Beast's string body reader appends at the body's end: emptied by each write, it stays small.
            auto out = co_await core::FileSink::open(work_, upload.path);
            co_await out.take(req.body(), parser.is_done());
            while (!parser.is_done()) {
                auto [ec, n] = co_await bhttp::async_read_some(stream, buffer, parser, tok);
                if (ec == bhttp::error::body_limit)
                    throw Error(ErrorKind::request_too_large,
                                fmt::format("the file is larger than max_batch_file ({} bytes): raise "
                                            "max_batch_file in loch.yaml",
                                            options_.max_batch_file_bytes),
                                {{"limit_bytes", options_.max_batch_file_bytes}});
                if (ec) co_return false;  // the client went, or was too slow (the session's body deadline)
                received = out.written() + req.body().size();
                co_await out.take(req.body(), parser.is_done());
            }
        } catch (const std::system_error& e) {
            refuse_write(e, upload.path, received);
        }
        complete = true;
        upload.kept = true;  // accept_file's now
        answer = co_await accept_file(upload.path, std::string(req[bhttp::field::content_type]));
    } catch (const Error& e) {
        err = e;
    } catch (const std::exception& e) {
        err = Error(ErrorKind::internal, std::string("internal error: ") + e.what());
    }
    // A refusal before the whole body arrived closes the connection (what is left of it is not read).
    const bool keep = complete && req.keep_alive();
    if (err) {
        rec.status = static_cast<unsigned>(status_of(err->kind()));
        rec.error_type = broker::to_string(err->kind());
        co_await write_error(stream, v, keep, *err);
        if (!complete) co_await drain_before_close(stream);
    } else {
        rec.status = 200;
        co_await write_json(stream, v, keep, 200, answer);
    }
    rec.duration_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
    journal_.log(std::move(rec));
    co_return keep;
}

namespace {

// On the worker pool (core/off_loop.hpp): reads the form from the mapped upload, checks every line and
// writes the file part to `files_dir/<id>`. Touches nothing of loch's state: the rules carry copies.
batch::FileRecord check_and_keep(const fs::path& upload, const std::string& boundary,
                                 const fs::path& files_dir, const batch::InputRules& rules) {
    batch::FileRecord rec;
    const MappedFile mapped(upload);
    std::string purpose;
    std::optional<FormPart> file;
    for (auto& part : read_form(mapped.view(), boundary)) {
        if (part.name == "purpose") purpose = std::string(part.value);
        if (part.name == "file" && part.filename) file = part;
    }
    if (!file) throw Error(ErrorKind::invalid_request, "POST /v1/files needs a `file` part with a filename");
    if (purpose != "batch")
        throw Error(
            ErrorKind::invalid_request,
            fmt::format("loch keeps Batch API input files only: purpose must be \"batch\", got \"{}\"",
                        purpose),
            {{"purpose", purpose}});
    ViewBuffer view(file->value);
    std::istream in(&view);
    const auto check = batch::check_input_file(in, rules);
    if (!check.ok()) {
        nlohmann::json problems = nlohmann::json::array();
        for (const auto& p : check.problems) problems.push_back({{"line", p.line}, {"message", p.message}});
        throw Error(
            ErrorKind::invalid_request,
            fmt::format("the batch input file '{}' has problems: {}", *file->filename, check.summary()),
            {{"problems", problems}, {"more_problems", check.more_problems}});
    }
    rec.id = batch::Store::new_id("file-");
    rec.purpose = purpose;
    rec.filename = *file->filename;
    rec.bytes = file->value.size();
    rec.path = files_dir / rec.id;
    rec.created_at = unix_now();
    // The file part alone, written out of the mapping (then renamed: a kept file is always whole).
    TempFile part{rec.path.string() + ".part"};
    {
        std::ofstream out(part.path, std::ios::binary);
        out.write(file->value.data(), static_cast<std::streamsize>(file->value.size()));
        if (!out) throw Error(ErrorKind::internal, "cannot write " + part.path.string());
    }
    fs::rename(part.path, rec.path);
    part.kept = true;
    return rec;
}

}  // namespace

batch::InputRules BatchApi::input_rules() const {
    // Copies of what the check needs (it runs off the loop, and a reload may change the config meanwhile).
    std::set<std::string> known;
    std::vector<std::string> names;
    for (const auto& m : broker_.view().config().models) {
        names.push_back(m.name);
        known.insert(m.name);
        known.insert(m.aliases.begin(), m.aliases.end());
    }
    batch::InputRules rules;
    rules.url_problem = [](const std::string& url) -> std::optional<std::string> {
        if (auto problem = batch_route_problem(url)) return "url " + *problem;
        return std::nullopt;
    };
    rules.model_problem = [known, names](const std::string& model) -> std::optional<std::string> {
        if (known.contains(model)) return std::nullopt;
        return fmt::format("no model named '{}' (known: {})", model, fmt::join(names, ", "));
    };
    return rules;
}

asio::awaitable<nlohmann::json> BatchApi::accept_file(fs::path upload, std::string content_type) {
    const TempFile whole{upload};  // the upload as it arrived goes, whether kept or refused
    auto& store = store_or_refuse();
    const auto boundary = form_boundary(content_type);
    if (!boundary)
        throw Error(ErrorKind::invalid_request,
                    "POST /v1/files takes multipart/form-data with the fields purpose and file");
    // Seconds of parsing for a GiB file: on the worker pool, while loch goes on serving.
    const batch::FileRecord rec = co_await core::off_loop(
        work_, [upload, b = std::string(*boundary), dir = options_.batch_dir / "files",
                rules = input_rules()] { return check_and_keep(upload, b, dir, rules); });
    store.add_file(rec);
    co_return file_json(rec);
}

asio::awaitable<bool> BatchApi::files_route(beast::tcp_stream& stream, const Request& req, const Route& r) {
    const unsigned v = req.version();
    const bool keep = req.keep_alive();
    auto& store = store_or_refuse();
    if (is_file_upload(req)) {
        // A small upload that arrived whole with its header: the same path as a streamed one.
        TempFile upload{options_.batch_dir / "tmp" / (batch::Store::new_id("upload-") + ".part")};
        std::string body = req.body();
        try {
            auto out = co_await core::FileSink::open(work_, upload.path);
            co_await out.take(body, true);
        } catch (const std::system_error& e) {
            refuse_write(e, upload.path, req.body().size());
        }
        upload.kept = true;  // accept_file's now
        const nlohmann::json answer =
            co_await accept_file(upload.path, std::string(req[bhttp::field::content_type]));
        co_await write_json(stream, v, keep, 200, answer);
        co_return keep;
    }
    if (r.engine.empty()) {
        nlohmann::json data = nlohmann::json::array();
        for (const auto& f : store.files()) data.push_back(file_json(f));
        const nlohmann::json answer = {{"object", "list"}, {"data", data}, {"has_more", false}};
        co_await write_json(stream, v, keep, 200, answer);
        co_return keep;
    }
    const auto f = store.file(r.engine);
    if (!f) throw Error(ErrorKind::not_found, "no file '" + r.engine + "'", {{"file", r.engine}});
    if (req.method() == bhttp::verb::delete_) {
        if (runner_->uses_file(f->id))
            throw Error(ErrorKind::conflict,
                        fmt::format("file '{}' is the input of a batch that has not ended: cancel the batch "
                                    "first (POST /v1/batches/{{id}}/cancel)",
                                    f->id),
                        {{"file", f->id}});
        std::error_code ec;
        fs::remove(f->path, ec);
        store.remove_file(f->id);
        const nlohmann::json answer = {{"id", f->id}, {"object", "file"}, {"deleted", true}};
        co_await write_json(stream, v, keep, 200, answer);
        co_return keep;
    }
    if (!r.path.ends_with("/content")) {
        co_await write_json(stream, v, keep, 200, file_json(*f));
        co_return keep;
    }
    // The bytes, from disk as they are sent (a large file is never read whole).
    bhttp::response<bhttp::file_body> res{bhttp::status::ok, v};
    res.set(bhttp::field::server, "loch");
    res.set(bhttp::field::content_type, "application/octet-stream");
    res.keep_alive(keep);
    beast::error_code ec;
    res.body().open(f->path.c_str(), beast::file_mode::scan, ec);
    if (ec) throw Error(ErrorKind::internal, "cannot read " + f->path.string() + ": " + ec.message());
    res.prepare_payload();
    // A client reading at 1 MiB/s gets the whole file; one that stops reading is cut off.
    const auto limit = std::chrono::seconds(30 + static_cast<std::int64_t>(f->bytes >> 20));
    stream.expires_after(limit);
    auto [wec, wn] = co_await bhttp::async_write(stream, res, tok);
    stream.expires_never();
    co_return !wec && keep;
}

}  // namespace loch::http
