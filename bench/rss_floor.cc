// The memory floor of a slurm-k8s-shim-like process: linked with the same
// shared libraries as the shim (libstdc++, jsoncpp, libuv, libc), it parses
// and writes one JSON document, creates a libuv loop, then waits. Its RSS is
// what any such process costs before doing any work (bench_resources.py).
#include <json/json.h>
#include <unistd.h>
#include <uv.h>

#include <cstdio>
#include <memory>
#include <string>

int main() {
    Json::CharReaderBuilder rb;
    std::unique_ptr<Json::CharReader> reader(rb.newCharReader());
    const std::string doc = R"({"kind":"Pod","spec":{"containers":[{"name":"c"}]}})";
    Json::Value v;
    std::string err;
    if (!reader->parse(doc.data(), doc.data() + doc.size(), &v, &err)) return 1;
    Json::StreamWriterBuilder wb;
    std::string out = Json::writeString(wb, v);
    uv_loop_t loop;
    uv_loop_init(&loop);
    std::printf("ready %zu\n", out.size());
    std::fflush(stdout);
    pause();  // until the bench kills it
    uv_loop_close(&loop);
    return 0;
}
