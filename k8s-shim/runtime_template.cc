#include "k8s-shim/runtime_template.h"

#include <algorithm>

#include <fnmatch.h>

#include "common/config.h"
#include "common/strings.h"

namespace sk::shim {

namespace {

std::vector<std::string> split_words(std::string_view s) {
    std::vector<std::string> out;
    std::string cur;
    for (char c : s) {
        if (c == ' ' || c == '\t') {
            if (!cur.empty()) out.push_back(std::move(cur));
            cur.clear();
        } else {
            cur += c;
        }
    }
    if (!cur.empty()) out.push_back(std::move(cur));
    return out;
}

void replace_all(std::string *s, const std::string &from, const std::string &to) {
    for (size_t pos = s->find(from); pos != std::string::npos; pos = s->find(from, pos + to.size()))
        s->replace(pos, from.size(), to);
}

}  // namespace

Status RuntimeTemplates::add(const std::string &value, const std::string &where) {
    auto words = split_words(value);
    if (words.size() < 2)
        return fail(Error::InvalidArgument,
                    where +
                        ": template needs an image pattern and a command, e.g. "
                        "'template = docker.io/* apptainer exec docker://{image} {command}'");
    RuntimeTemplate t;
    t.pattern = words[0];
    t.words.assign(words.begin() + 1, words.end());
    templates_.push_back(std::move(t));
    return {};
}

Result<RuntimeTemplates> RuntimeTemplates::parse(std::string_view text, std::string_view source) {
    auto kvs = parse_kv_text(text, source);
    if (!kvs) return kvs.failure();
    RuntimeTemplates out;
    ConfigSchema schema;
    schema.add(
        "template", "IMAGE-PATTERN COMMAND-TEMPLATE ({image}, {name}, {command}, {mounts:FLAG})",
        [&out](const std::string &value, const std::string &) -> Status {
            return out.add(value, "template");
        },
        true);
    schema.add(
        "podman", "IMAGE-PATTERN run through the podman runtime",
        [&out](const std::string &value, const std::string &) -> Status {
            auto words = split_words(value);
            if (words.size() != 1)
                return fail(Error::InvalidArgument,
                            "podman takes one image pattern, e.g. 'podman = registry.site/*'");
            RuntimeTemplate t;
            t.pattern = words[0];
            t.podman = true;
            out.templates_.push_back(std::move(t));
            return {};
        },
        true);
    PodmanSettings &p = out.podman_;
    schema.add_string("podman_binary", &p.binary, "the podman program (PATH is searched)");
    schema.add_string("podman_storage_driver", &p.storage_driver,
                      "podman's storage driver (overlay, vfs)");
    schema.add_string("podman_oci_runtime", &p.oci_runtime, "the OCI runtime podman uses");
    schema.add(
        "podman_option", "more global options for every podman command (words)",
        [&p](const std::string &value, const std::string &) -> Status {
            for (auto &w : split_words(value))
                p.options.push_back(std::move(w));
            return {};
        },
        true);
    schema.add(
        "insecure_registry", "HOST[:PORT] of a registry pulled from over plain HTTP",
        [&p](const std::string &value, const std::string &) -> Status {
            if (value.empty() || value.find_first_of("/ \t") != std::string::npos)
                return fail(Error::InvalidArgument,
                            "insecure_registry takes HOST or HOST:PORT, e.g. 127.0.0.1:5000");
            p.insecure_registries.push_back(value);
            return {};
        },
        true);
    schema.add(
        "gpu_device", "the device node of GPU {index} (default /dev/nvidia{index})",
        [&p](const std::string &value, const std::string &) -> Status {
            if (value.empty() || value[0] != '/' || value.find("{index}") == std::string::npos)
                return fail(Error::InvalidArgument,
                            "gpu_device must be an absolute path holding {index}, e.g. "
                            "/dev/nvidia{index}");
            p.gpu_device = value;
            return {};
        });
    schema.add("gpu_control_devices", "device nodes every GPU container gets (words)",
               [&p](const std::string &value, const std::string &) -> Status {
                   p.gpu_control_devices = split_words(value);
                   for (const auto &d : p.gpu_control_devices)
                       if (d.empty() || d[0] != '/')
                           return fail(Error::InvalidArgument,
                                       "gpu_control_devices takes absolute paths, not '" + d + "'");
                   return {};
               });
    auto st = schema.apply(*kvs);
    if (!st) return st.failure();
    return out;
}

bool RuntimeTemplates::uses_podman() const {
    for (const auto &t : templates_)
        if (t.podman) return true;
    return false;
}

const RuntimeTemplate *RuntimeTemplates::match(const std::string &image) const {
    for (const auto &t : templates_)
        if (fnmatch(t.pattern.c_str(), image.c_str(), 0) == 0) return &t;
    return nullptr;
}

namespace {

constexpr std::string_view kMountsWord = "{mounts:";

// The FLAG of a "{mounts:FLAG}" word; empty when w is not one.
std::string_view mounts_flag(std::string_view w) {
    if (w.size() <= kMountsWord.size() + 1 || w.substr(0, kMountsWord.size()) != kMountsWord ||
        w.back() != '}')
        return {};
    return w.substr(kMountsWord.size(), w.size() - kMountsWord.size() - 1);
}

constexpr std::string_view kCdiWord = "{cdi:";

std::string_view cdi_flag(std::string_view w) {
    if (w.size() <= kCdiWord.size() + 1 || w.substr(0, kCdiWord.size()) != kCdiWord ||
        w.back() != '}')
        return {};
    return w.substr(kCdiWord.size(), w.size() - kCdiWord.size() - 1);
}

}  // namespace

void fill_cdi_slots(std::vector<std::string> *argv,
                    const std::vector<std::pair<size_t, std::string>> &slots,
                    const std::vector<std::string> &names) {
    for (auto it = slots.rbegin(); it != slots.rend(); ++it) {
        std::vector<std::string> words;
        for (const auto &n : names) {
            words.push_back(it->second);
            words.push_back(n);
        }
        size_t at = std::min(it->first, argv->size());
        argv->insert(argv->begin() + static_cast<std::ptrdiff_t>(at), words.begin(), words.end());
    }
}

bool RuntimeTemplates::passes_mounts(const RuntimeTemplate &t) {
    if (t.podman) return true;  // podman -v
    for (const auto &w : t.words)
        if (!mounts_flag(w).empty()) return true;
    return false;
}

std::vector<std::string> RuntimeTemplates::expand(
    const RuntimeTemplate &t, const std::string &image, const std::string &name,
    const std::vector<std::string> &command, const std::vector<BindMount> &mounts,
    std::vector<std::pair<size_t, std::string>> *cdi_slots) {
    std::vector<std::string> argv;
    for (const auto &w : t.words) {
        if (auto flag = cdi_flag(w); !flag.empty()) {
            if (cdi_slots) cdi_slots->emplace_back(argv.size(), std::string(flag));
            continue;
        }
        if (w == "{command}") {
            argv.insert(argv.end(), command.begin(), command.end());
            continue;
        }
        if (auto flag = mounts_flag(w); !flag.empty()) {
            for (const auto &m : mounts) {
                argv.emplace_back(flag);
                argv.push_back(m.source + ":" + m.target + (m.read_only ? ":ro" : ""));
            }
            continue;
        }
        std::string word = w;
        replace_all(&word, "{image}", image);
        replace_all(&word, "{name}", name);
        argv.push_back(std::move(word));
    }
    return argv;
}

}  // namespace sk::shim
