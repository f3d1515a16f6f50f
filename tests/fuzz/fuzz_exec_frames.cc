// The exec session data connection's frames (common/daemons/exec_frames.h) under
// arbitrary chunking: the agent and the shim read a socket in whatever pieces
// the kernel hands over. Input: 1 byte (bit 0: the direction), then
// (chunk-length byte, chunk) pairs. Properties:
// - the frames and the failure are the same whatever the chunking (against
//   the whole stream fed at once);
// - re-encoding the frames gives back the stream's prefix they came from;
// - a failure names the frame's fault, and the decoder stays failed;
// - a Resize payload decodes or is refused, and what decodes re-encodes.
#include <string>
#include <vector>

#include "common/daemons/exec_frames.h"
#include "tests/fuzz/fuzz_target.h"

using namespace sk::proto;

SK_FUZZ_TARGET(exec_frames) {
    if (size < 1) return 0;
    ExecDirection dir = (data[0] & 1) ? ExecDirection::ToAgent : ExecDirection::ToShim;
    std::string stream;
    std::vector<std::string> chunks;
    for (size_t i = 1; i < size;) {
        size_t n = data[i++];
        n = std::min(n, size - i);
        chunks.emplace_back(reinterpret_cast<const char *>(data + i), n);
        stream += chunks.back();
        i += n;
    }
    ExecFrameDecoder whole(dir);
    std::vector<ExecFrame> ref;
    sk::Status ref_st = whole.feed(stream, &ref);

    ExecFrameDecoder pieces(dir);
    std::vector<ExecFrame> got;
    sk::Status st;
    for (const auto &c : chunks) {
        st = pieces.feed(c, &got);
        if (!st) break;
    }
    FUZZ_CHECK(st.ok() == ref_st.ok());
    if (!ref_st) {
        FUZZ_CHECK(!ref_st.message().empty());
        FUZZ_CHECK(!whole.feed(encode_exec_frame(ExecChannel::Stdin, "x"), &ref).ok());
    }
    FUZZ_CHECK(got.size() == ref.size());
    std::string again;
    for (size_t i = 0; i < ref.size(); i++) {
        FUZZ_CHECK(got[i].channel == ref[i].channel && got[i].payload == ref[i].payload);
        FUZZ_CHECK(ref[i].payload.size() <= kMaxExecFramePayload);
        again += encode_exec_frame(ref[i].channel, ref[i].payload);
        if (ref[i].channel == ExecChannel::Resize) {
            auto t = resize_from_payload(ref[i].payload);
            if (t) {
                auto back = resize_from_payload("{\"Width\":" + std::to_string(t->width) +
                                                ",\"Height\":" + std::to_string(t->height) + "}");
                FUZZ_CHECK(back.ok() && back->width == t->width && back->height == t->height);
            }
        }
    }
    FUZZ_CHECK(stream.compare(0, again.size(), again) == 0);
    return 0;
}
