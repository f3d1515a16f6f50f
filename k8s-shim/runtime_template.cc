#include "k8s-shim/runtime_template.h"

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
    auto st = schema.apply(*kvs);
    if (!st) return st.failure();
    return out;
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

}  // namespace

bool RuntimeTemplates::passes_mounts(const RuntimeTemplate &t) {
    for (const auto &w : t.words)
        if (!mounts_flag(w).empty()) return true;
    return false;
}

std::vector<std::string> RuntimeTemplates::expand(const RuntimeTemplate &t,
                                                  const std::string &image, const std::string &name,
                                                  const std::vector<std::string> &command,
                                                  const std::vector<BindMount> &mounts) {
    std::vector<std::string> argv;
    for (const auto &w : t.words) {
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
