#include "agent/kubelet/streams/spdy.h"

#include <zlib.h>

#include <algorithm>
#include <cstring>

namespace sk::spdy {

namespace {

// The dictionary is the names of the SPDY/3 draft's list, each behind its
// length as a 4-byte big-endian integer, then a run of common values.
constexpr const char *kDictNames[] = {"options",
                                      "head",
                                      "post",
                                      "put",
                                      "delete",
                                      "trace",
                                      "accept",
                                      "accept-charset",
                                      "accept-encoding",
                                      "accept-language",
                                      "accept-ranges",
                                      "age",
                                      "allow",
                                      "authorization",
                                      "cache-control",
                                      "connection",
                                      "content-base",
                                      "content-encoding",
                                      "content-language",
                                      "content-length",
                                      "content-location",
                                      "content-md5",
                                      "content-range",
                                      "content-type",
                                      "date",
                                      "etag",
                                      "expect",
                                      "expires",
                                      "from",
                                      "host",
                                      "if-match",
                                      "if-modified-since",
                                      "if-none-match",
                                      "if-range",
                                      "if-unmodified-since",
                                      "last-modified",
                                      "location",
                                      "max-forwards",
                                      "pragma",
                                      "proxy-authenticate",
                                      "proxy-authorization",
                                      "range",
                                      "referer",
                                      "retry-after",
                                      "server",
                                      "te",
                                      "trailer",
                                      "transfer-encoding",
                                      "upgrade",
                                      "user-agent",
                                      "vary",
                                      "via",
                                      "warning",
                                      "www-authenticate",
                                      "method",
                                      "get",
                                      "status",
                                      "200 OK",
                                      "version",
                                      "HTTP/1.1",
                                      "url",
                                      "public",
                                      "set-cookie",
                                      "keep-alive",
                                      "origin"};
constexpr const char kDictTail[] =
    "100101201202205206300302303304305306307402405406407408409410411412413414415416417502504505"
    "203 Non-Authoritative Information204 No Content301 Moved Permanently400 Bad Request"
    "401 Unauthorized403 Forbidden404 Not Found500 Internal Server Error501 Not Implemented"
    "503 Service UnavailableJan Feb Mar Apr May Jun Jul Aug Sept Oct Nov Dec 00:00:00 "
    "Mon, Tue, Wed, Thu, Fri, Sat, Sun, GMTchunked,text/html,image/png,image/jpg,image/gif,"
    "application/xml,application/xhtml+xml,text/plain,text/javascript,publicprivatemax-age="
    "gzip,deflate,sdchcharset=utf-8charset=iso-8859-1,utf-,*,enq=0.";

void put32(std::string *out, uint32_t v) {
    const char b[4] = {static_cast<char>(v >> 24), static_cast<char>(v >> 16),
                       static_cast<char>(v >> 8), static_cast<char>(v)};
    out->append(b, 4);
}

void put16(std::string *out, uint16_t v) {
    const char b[2] = {static_cast<char>(v >> 8), static_cast<char>(v)};
    out->append(b, 2);
}

uint32_t get32(const char *p) {
    const auto *u = reinterpret_cast<const unsigned char *>(p);
    return (uint32_t{u[0]} << 24) | (uint32_t{u[1]} << 16) | (uint32_t{u[2]} << 8) | u[3];
}

// Reads big-endian fields off a byte range, never past its end.
class Reader {
  public:
    explicit Reader(std::string_view s) : s_(s) {}
    size_t left() const { return s_.size(); }
    bool u32(uint32_t *v) {
        if (s_.size() < 4) return false;
        *v = get32(s_.data());
        s_.remove_prefix(4);
        return true;
    }
    bool take(size_t n, std::string_view *v) {
        if (s_.size() < n) return false;
        *v = s_.substr(0, n);
        s_.remove_prefix(n);
        return true;
    }

  private:
    std::string_view s_;
};

const char *type_name(uint16_t type) {
    switch (type) {
        case 1:
            return "SYN_STREAM";
        case 2:
            return "SYN_REPLY";
        case 3:
            return "RST_STREAM";
        case 4:
            return "SETTINGS";
        case 6:
            return "PING";
        case 7:
            return "GOAWAY";
        case 8:
            return "HEADERS";
        case 9:
            return "WINDOW_UPDATE";
        default:
            return "control frame";
    }
}

bool known_type(uint16_t type) {
    return type >= 1 && type <= 9 && type != 5;
}

Failure bad(const char *what, const std::string &detail) {
    return fail(Error::Parse, std::string("spdy: ") + what + ": " + detail);
}

}  // namespace

std::string_view header_dictionary() {
    static const std::string dict = [] {
        std::string d;
        for (const char *name : kDictNames) {
            put32(&d, static_cast<uint32_t>(std::strlen(name)));
            d += name;
        }
        d += kDictTail;
        return d;
    }();
    return dict;
}

const std::string *find_header(const HeaderBlock &headers, std::string_view name) {
    for (const auto &h : headers)
        if (h.name == name) return &h.value;
    return nullptr;
}

bool valid_header_name(std::string_view name) {
    if (name.empty()) return false;
    for (char c : name) {
        auto u = static_cast<unsigned char>(c);
        if (u <= 0x20 || u >= 0x7f || (c >= 'A' && c <= 'Z')) return false;
    }
    return true;
}

bool valid_header_value(std::string_view value) {
    if (value.empty()) return true;
    if (value.front() == '\0' || value.back() == '\0') return false;
    return value.find(std::string_view("\0\0", 2)) == std::string_view::npos;
}

std::vector<std::string_view> header_values(std::string_view value) {
    std::vector<std::string_view> parts;
    while (!value.empty()) {
        size_t nul = value.find('\0');
        parts.push_back(value.substr(0, nul));
        if (nul == std::string_view::npos) break;
        value.remove_prefix(nul + 1);
    }
    return parts;
}

Frame syn_reply(uint32_t stream_id, HeaderBlock headers, bool fin) {
    Frame f;
    f.type = FrameType::SynReply;
    f.flags = fin ? kFlagFin : 0;
    f.stream_id = stream_id;
    f.headers = std::move(headers);
    return f;
}

Frame data_frame(uint32_t stream_id, std::string data, bool fin) {
    Frame f;
    f.type = FrameType::Data;
    f.flags = fin ? kFlagFin : 0;
    f.stream_id = stream_id;
    f.data = std::move(data);
    return f;
}

Frame rst_stream(uint32_t stream_id, uint32_t status) {
    Frame f;
    f.type = FrameType::RstStream;
    f.stream_id = stream_id;
    f.status = status;
    return f;
}

Frame ping(uint32_t id) {
    Frame f;
    f.type = FrameType::Ping;
    f.ping_id = id;
    return f;
}

Frame goaway(uint32_t last_good_stream_id, uint32_t status) {
    Frame f;
    f.type = FrameType::GoAway;
    f.stream_id = last_good_stream_id;
    f.status = status;
    return f;
}

Frame window_update(uint32_t stream_id, uint32_t delta) {
    Frame f;
    f.type = FrameType::WindowUpdate;
    f.stream_id = stream_id;
    f.delta_window = delta;
    return f;
}

// ---- decoding ----

// The peer's zlib stream: one for every header block it sends.
struct Decoder::Inflater {
    z_stream z{};
    bool ready = false;
    ~Inflater() {
        if (ready) inflateEnd(&z);
    }

    // The whole compressed block in, its decompressed bytes out, at most `max`.
    Result<std::string> inflate_block(std::string_view in, size_t max) {
        if (!ready) {
            if (inflateInit(&z) != Z_OK) return fail(Error::Internal, "spdy: inflateInit failed");
            ready = true;
        }
        // zlib's interface takes non-const input; it never writes to it.
        z.next_in = reinterpret_cast<Bytef *>(const_cast<char *>(in.data()));
        z.avail_in = static_cast<uInt>(in.size());
        std::string out;
        char chunk[4096];
        for (;;) {
            z.next_out = reinterpret_cast<Bytef *>(chunk);
            z.avail_out = sizeof chunk;
            int rc = ::inflate(&z, Z_SYNC_FLUSH);
            if (rc == Z_NEED_DICT) {
                std::string_view d = header_dictionary();
                if (inflateSetDictionary(&z, reinterpret_cast<const Bytef *>(d.data()),
                                         static_cast<uInt>(d.size())) != Z_OK)
                    return bad("header block", "the zlib stream's dictionary is not SPDY/3's");
                continue;
            }
            size_t got = sizeof chunk - z.avail_out;
            if (out.size() + got > max)
                return fail(Error::TooLarge, "spdy: a header block decompresses to more than " +
                                                 std::to_string(max) + " bytes");
            out.append(chunk, got);
            if (rc == Z_STREAM_END) return bad("header block", "the peer ended its zlib stream");
            if (rc == Z_BUF_ERROR) break;  // no progress possible: all input used
            if (rc != Z_OK)
                return bad("header block", std::string("zlib: ") + (z.msg ? z.msg : "error"));
            if (z.avail_in == 0 && z.avail_out != 0) break;
        }
        return out;
    }
};

Decoder::Decoder(const Limits &limits) : limits_(limits), inflater_(std::make_unique<Inflater>()) {}
Decoder::~Decoder() = default;

Status Decoder::fail_with(Failure f) {
    failed_ = std::make_unique<Failure>(f);
    buf_.clear();
    return f;
}

Status Decoder::feed(std::string_view bytes, std::vector<Frame> *out) {
    if (failed_) return *failed_;
    for (;;) {
        if (buf_.size() < 8) {
            size_t take = std::min(8 - buf_.size(), bytes.size());
            buf_.append(bytes.data(), take);
            bytes.remove_prefix(take);
            if (buf_.size() < 8) return {};
            uint32_t w0 = get32(buf_.data());
            size_t len = get32(buf_.data() + 4) & 0xffffff;
            bool control = (w0 & 0x80000000u) != 0;
            if (control && ((w0 >> 16) & 0x7fff) != kVersion)
                return fail_with(bad(
                    "frame",
                    "SPDY version " + std::to_string((w0 >> 16) & 0x7fff) + " (only 3 is spoken)"));
            size_t max = control ? limits_.max_control_payload : limits_.max_data_payload;
            if (len > max)
                return fail_with(fail(Error::TooLarge,
                                      std::string("spdy: a ") +
                                          (control ? type_name(w0 & 0xffff) : "DATA frame") +
                                          " of " + std::to_string(len) +
                                          " bytes is over the limit of " + std::to_string(max)));
        }
        size_t need = 8 + (get32(buf_.data() + 4) & 0xffffff);
        size_t take = std::min(need - buf_.size(), bytes.size());
        buf_.append(bytes.data(), take);
        bytes.remove_prefix(take);
        if (buf_.size() < need) return {};
        if (Status st = decode(out); !st) return fail_with(st.failure());
        buf_.clear();
        if (buf_.capacity() > (64 << 10)) buf_.shrink_to_fit();  // an idle link stays small
        if (bytes.empty()) return {};
    }
}

// Decodes the one complete frame in buf_.
Status Decoder::decode(std::vector<Frame> *out) {
    uint32_t w0 = get32(buf_.data());
    uint32_t w1 = get32(buf_.data() + 4);
    Frame f;
    f.flags = static_cast<uint8_t>(w1 >> 24);
    Reader r(std::string_view(buf_).substr(8));
    if ((w0 & 0x80000000u) == 0) {
        f.type = FrameType::Data;
        f.stream_id = w0 & kMaxStreamId;
        if (f.stream_id == 0) return bad("DATA frame", "stream id 0");
        f.data.assign(buf_, 8, std::string::npos);
        out->push_back(std::move(f));
        return {};
    }
    auto type = static_cast<uint16_t>(w0 & 0xffff);
    if (!known_type(type)) return {};  // CREDENTIAL and unknown types: ignored
    f.type = static_cast<FrameType>(type);
    const char *name = type_name(type);
    const size_t len = r.left();
    auto fixed = [&](size_t want) -> Status {
        if (len != want)
            return bad(name, "length " + std::to_string(len) + ", not " + std::to_string(want));
        if (f.flags != 0) return bad(name, "flags " + std::to_string(f.flags) + " on it");
        return {};
    };
    auto block = [&](std::string_view compressed) -> Status {
        auto raw = inflater_->inflate_block(compressed, limits_.max_header_block);
        if (!raw) return raw.failure();
        Reader b(*raw);
        uint32_t count = 0;
        if (!b.u32(&count)) return bad(name, "header block without its pair count");
        if (count > limits_.max_headers)
            return fail(Error::TooLarge, std::string("spdy: ") + name + " with " +
                                             std::to_string(count) + " headers (the limit is " +
                                             std::to_string(limits_.max_headers) + ")");
        for (uint32_t i = 0; i < count; i++) {
            uint32_t n = 0;
            std::string_view hname, hvalue;
            if (!b.u32(&n) || !b.take(n, &hname) || !b.u32(&n) || !b.take(n, &hvalue))
                return bad(name, "header block truncated");
            if (!valid_header_name(hname)) return bad(name, "invalid header name");
            if (!valid_header_value(hvalue))
                return bad(name, "invalid value of header " + std::string(hname));
            if (find_header(f.headers, hname))
                return bad(name, "header " + std::string(hname) + " twice");
            f.headers.push_back({std::string(hname), std::string(hvalue)});
        }
        if (b.left() != 0) return bad(name, "bytes after the header block's last pair");
        return {};
    };
    auto stream_id = [&](bool zero_ok) -> Status {
        uint32_t v = 0;
        if (!r.u32(&v)) return bad(name, "too short");
        f.stream_id = v & kMaxStreamId;
        if (f.stream_id == 0 && !zero_ok) return bad(name, "stream id 0");
        return {};
    };
    Status st;
    uint32_t v = 0;
    std::string_view rest;
    switch (f.type) {
        case FrameType::SynStream:
            if (len < 10) return bad(name, "too short");
            if (!(st = stream_id(false))) return st;
            (void)r.u32(&v);
            f.associated_id = v & kMaxStreamId;
            (void)r.take(2, &rest);
            f.priority = static_cast<uint8_t>(static_cast<unsigned char>(rest[0]) >> 5);
            f.slot = static_cast<uint8_t>(rest[1]);
            (void)r.take(r.left(), &rest);
            if (!(st = block(rest))) return st;
            break;
        case FrameType::SynReply:
        case FrameType::Headers:
            if (len < 4) return bad(name, "too short");
            if (!(st = stream_id(false))) return st;
            (void)r.take(r.left(), &rest);
            if (!(st = block(rest))) return st;
            break;
        case FrameType::RstStream:
            if (!(st = fixed(8)) || !(st = stream_id(false))) return st;
            (void)r.u32(&f.status);
            if (f.status == 0) return bad(name, "status 0");
            break;
        case FrameType::Settings: {
            uint32_t count = 0;
            if (!r.u32(&count)) return bad(name, "too short");
            if (uint64_t{count} * 8 != r.left())
                return bad(name,
                           std::to_string(count) + " entries in " + std::to_string(len) + " bytes");
            for (uint32_t i = 0; i < count; i++) {
                Setting s;
                (void)r.u32(&v);
                s.flags = static_cast<uint8_t>(v >> 24);
                s.id = v & 0xffffff;
                (void)r.u32(&s.value);
                f.settings.push_back(s);
            }
            break;
        }
        case FrameType::Ping:
            if (!(st = fixed(4))) return st;
            (void)r.u32(&f.ping_id);
            if (f.ping_id == 0) return bad(name, "id 0");
            break;
        case FrameType::GoAway:
            if (!(st = fixed(8)) || !(st = stream_id(true))) return st;
            (void)r.u32(&f.status);
            break;
        case FrameType::WindowUpdate:
            if (!(st = fixed(8)) || !(st = stream_id(true))) return st;
            (void)r.u32(&v);
            f.delta_window = v & kMaxStreamId;
            if (f.delta_window == 0) return bad(name, "delta 0");
            break;
        case FrameType::Data:
            break;  // handled above
    }
    out->push_back(std::move(f));
    return {};
}

// ---- encoding ----

// This side's zlib stream. A 2 KiB window and a small hash table keep each
// connection's state near 16 KiB (the SPDY/3 draft suggests it; any
// decompressor reads it).
struct Encoder::Deflater {
    z_stream z{};
    bool ready = false;
    bool broken = false;
    ~Deflater() {
        if (ready) deflateEnd(&z);
    }

    Result<std::string> deflate_block(std::string_view raw) {
        if (broken) return fail(Error::Internal, "spdy: the header compressor failed before");
        if (!ready) {
            std::string_view d = header_dictionary();
            if (deflateInit2(&z, Z_DEFAULT_COMPRESSION, Z_DEFLATED, 11, 4, Z_DEFAULT_STRATEGY) !=
                Z_OK)
                return fail(Error::Internal, "spdy: deflateInit failed");
            ready = true;
            if (deflateSetDictionary(&z, reinterpret_cast<const Bytef *>(d.data()),
                                     static_cast<uInt>(d.size())) != Z_OK) {
                broken = true;
                return fail(Error::Internal, "spdy: deflateSetDictionary failed");
            }
        }
        z.next_in = reinterpret_cast<Bytef *>(const_cast<char *>(raw.data()));
        z.avail_in = static_cast<uInt>(raw.size());
        std::string out;
        char chunk[4096];
        do {
            z.next_out = reinterpret_cast<Bytef *>(chunk);
            z.avail_out = sizeof chunk;
            int rc = ::deflate(&z, Z_SYNC_FLUSH);
            if (rc != Z_OK && rc != Z_BUF_ERROR) {
                broken = true;
                return fail(Error::Internal, "spdy: deflate failed");
            }
            out.append(chunk, sizeof chunk - z.avail_out);
        } while (z.avail_out == 0);
        return out;
    }
};

Encoder::Encoder() : deflater_(std::make_unique<Deflater>()) {}
Encoder::~Encoder() = default;

namespace {

Failure invalid(const char *what, const std::string &detail) {
    return fail(Error::InvalidArgument, std::string("spdy: cannot encode ") + what + ": " + detail);
}

void control_header(std::string *out, FrameType type, uint8_t flags, size_t len) {
    put16(out, static_cast<uint16_t>(0x8000 | kVersion));
    put16(out, static_cast<uint16_t>(type));
    put32(out, (uint32_t{flags} << 24) | static_cast<uint32_t>(len));
}

// The raw (uncompressed) header block, checked; at most half the length
// field so that its compressed form always fits the frame.
Result<std::string> raw_block(const HeaderBlock &headers, const char *what) {
    std::string raw;
    put32(&raw, static_cast<uint32_t>(headers.size()));
    for (size_t i = 0; i < headers.size(); i++) {
        const Header &h = headers[i];
        if (!valid_header_name(h.name)) return invalid(what, "invalid header name");
        if (!valid_header_value(h.value)) return invalid(what, "invalid value of header " + h.name);
        for (size_t j = 0; j < i; j++)
            if (headers[j].name == h.name) return invalid(what, "header " + h.name + " twice");
        if (raw.size() + 8 + h.name.size() + h.value.size() > kMaxLength / 2)
            return invalid(what, "header block too large");
        put32(&raw, static_cast<uint32_t>(h.name.size()));
        raw += h.name;
        put32(&raw, static_cast<uint32_t>(h.value.size()));
        raw += h.value;
    }
    return raw;
}

}  // namespace

Status Encoder::encode(const Frame &f, std::string *out) {
    auto type = static_cast<uint16_t>(f.type);
    const char *name = f.type == FrameType::Data ? "DATA frame" : type_name(type);
    if (f.stream_id > kMaxStreamId) return invalid(name, "stream id over 31 bits");
    bool zero_ok = f.type == FrameType::GoAway || f.type == FrameType::WindowUpdate ||
                   f.type == FrameType::Settings || f.type == FrameType::Ping;
    if (f.stream_id == 0 && !zero_ok) return invalid(name, "stream id 0");
    switch (f.type) {
        case FrameType::Data:
            if (f.data.size() > kMaxLength) return invalid(name, "payload over 16 MiB");
            put32(out, f.stream_id);
            put32(out, (uint32_t{f.flags} << 24) | static_cast<uint32_t>(f.data.size()));
            out->append(f.data);
            return {};
        case FrameType::SynStream:
        case FrameType::SynReply:
        case FrameType::Headers: {
            if (f.type == FrameType::SynStream) {
                if (f.associated_id > kMaxStreamId)
                    return invalid(name, "associated id over 31 bits");
                if (f.priority > 7) return invalid(name, "priority over 7");
            }
            auto raw = raw_block(f.headers, name);
            if (!raw) return raw.failure();
            auto packed = deflater_->deflate_block(*raw);
            if (!packed) return packed.failure();
            size_t fixed_len = f.type == FrameType::SynStream ? 10 : 4;
            control_header(out, f.type, f.flags, fixed_len + packed->size());
            put32(out, f.stream_id);
            if (f.type == FrameType::SynStream) {
                put32(out, f.associated_id);
                out->push_back(static_cast<char>(f.priority << 5));
                out->push_back(static_cast<char>(f.slot));
            }
            out->append(*packed);
            return {};
        }
        case FrameType::RstStream:
            if (f.status == 0) return invalid(name, "status 0");
            control_header(out, f.type, 0, 8);
            put32(out, f.stream_id);
            put32(out, f.status);
            return {};
        case FrameType::Settings:
            if (f.settings.size() > (kMaxLength - 4) / 8) return invalid(name, "too many entries");
            for (const auto &s : f.settings)
                if (s.id > 0xffffff) return invalid(name, "setting id over 24 bits");
            control_header(out, f.type, f.flags, 4 + 8 * f.settings.size());
            put32(out, static_cast<uint32_t>(f.settings.size()));
            for (const auto &s : f.settings) {
                put32(out, (uint32_t{s.flags} << 24) | s.id);
                put32(out, s.value);
            }
            return {};
        case FrameType::Ping:
            if (f.ping_id == 0) return invalid(name, "id 0");
            control_header(out, f.type, 0, 4);
            put32(out, f.ping_id);
            return {};
        case FrameType::GoAway:
            control_header(out, f.type, 0, 8);
            put32(out, f.stream_id);
            put32(out, f.status);
            return {};
        case FrameType::WindowUpdate:
            if (f.delta_window == 0 || f.delta_window > kMaxStreamId)
                return invalid(name, "delta outside 1 .. 2^31-1");
            control_header(out, f.type, 0, 8);
            put32(out, f.stream_id);
            put32(out, f.delta_window);
            return {};
    }
    return invalid("frame", "unknown type " + std::to_string(type));
}

}  // namespace sk::spdy
