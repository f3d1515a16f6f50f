#include "k8s-shim/cdi.h"

#include <dirent.h>

#include <algorithm>
#include <cctype>

#include "common/daemons/yaml.h"
#include "common/fs.h"

namespace sk::shim {
namespace {

constexpr size_t kMaxSpecFiles = 64;
constexpr size_t kMaxSpecBytes = size_t{1} << 20;

bool ends_with(std::string_view s, std::string_view suffix) {
    return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

void add_nodes(const Json::Value &edits, std::vector<std::string> *out) {
    const Json::Value &nodes = edits.isObject() ? edits["deviceNodes"] : Json::Value();
    if (!nodes.isArray()) return;
    for (const auto &n : nodes) {
        if (!n.isObject()) continue;
        const Json::Value &host = n["hostPath"], &path = n["path"];
        if (host.isString() && !host.asString().empty())
            out->push_back(host.asString());
        else if (path.isString())
            out->push_back(path.asString());
    }
}

}  // namespace

CdiNameForm cdi_name_form(std::string_view name) {
    if (name == "all") return CdiNameForm::All;
    if (!name.empty() && std::all_of(name.begin(), name.end(), [](char c) { return isdigit(c); }))
        return CdiNameForm::Index;
    if (name.rfind("GPU-", 0) == 0) return CdiNameForm::Uuid;
    if (name.rfind("MIG-", 0) == 0) return CdiNameForm::Mig;
    auto colon = name.find(':');
    if (colon != std::string_view::npos && colon > 0 && colon + 1 < name.size() &&
        cdi_name_form(name.substr(0, colon)) == CdiNameForm::Index &&
        cdi_name_form(name.substr(colon + 1)) == CdiNameForm::Index)
        return CdiNameForm::Mig;
    return CdiNameForm::Other;
}

Result<std::vector<CdiDevice>> parse_cdi_spec(std::string_view text) {
    auto doc = parse_yaml(text);
    if (!doc) return fail(Error::Invalid, "not YAML or JSON: " + doc.message());
    if (!doc->isObject()) return fail(Error::Invalid, "not a CDI specification (no object)");
    const Json::Value &kind = (*doc)["kind"];
    if (!kind.isString() || kind.asString().find('/') == std::string::npos)
        return fail(Error::Invalid, "not a CDI specification: no kind VENDOR/CLASS");
    std::vector<CdiDevice> out;
    const Json::Value &devices = (*doc)["devices"];
    if (!devices.isArray()) return fail(Error::Invalid, "a CDI specification without devices");
    for (const auto &d : devices) {
        if (!d.isObject() || !d["name"].isString() || d["name"].asString().empty())
            return fail(Error::Invalid, "a CDI device without a name");
        CdiDevice dev;
        dev.kind = kind.asString();
        dev.name = d["name"].asString();
        add_nodes(d["containerEdits"], &dev.device_nodes);
        out.push_back(std::move(dev));
    }
    return out;
}

const std::vector<std::string> &cdi_spec_dirs() {
    static const std::vector<std::string> dirs = {"/etc/cdi", "/var/run/cdi"};
    return dirs;
}

std::vector<CdiDevice> load_cdi_devices(const std::vector<std::string> &dirs,
                                        std::vector<std::string> *errors) {
    std::vector<CdiDevice> out;
    size_t files = 0;
    for (const auto &dir : dirs) {
        DIR *d = opendir(dir.c_str());
        if (!d) continue;  // a node without CDI: no such directory
        std::vector<std::string> names;
        while (struct dirent *e = readdir(d))
            if (ends_with(e->d_name, ".json") || ends_with(e->d_name, ".yaml") ||
                ends_with(e->d_name, ".yml"))
                names.emplace_back(e->d_name);
        closedir(d);
        std::sort(names.begin(), names.end());  // podman's order: by name
        for (const auto &n : names) {
            if (++files > kMaxSpecFiles) {
                if (errors) errors->push_back(dir + ": more than 64 specification files");
                return out;
            }
            std::string path = dir + "/" + n;
            auto text = read_file(path, kMaxSpecBytes, Links::Follow);  // the admins' dirs
            if (!text) {
                if (errors) errors->push_back(path + ": " + text.message());
                continue;
            }
            auto devs = parse_cdi_spec(*text);
            if (!devs) {
                if (errors) errors->push_back(path + ": " + devs.message());
                continue;
            }
            out.insert(out.end(), devs->begin(), devs->end());
        }
    }
    return out;
}

std::string cdi_gpu_for(const std::vector<CdiDevice> &devices, const std::string &gpu_device,
                        int index) {
    std::string node = gpu_device;
    auto at = node.find("{index}");
    if (at != std::string::npos) node.replace(at, 7, std::to_string(index));
    auto whole = [](const CdiDevice &d) {
        CdiNameForm f = cdi_name_form(d.name);
        return d.kind == kCdiGpuKind && (f == CdiNameForm::Index || f == CdiNameForm::Uuid);
    };
    for (const auto &d : devices)
        if (whole(d) &&
            std::find(d.device_nodes.begin(), d.device_nodes.end(), node) != d.device_nodes.end())
            return d.qualified();
    for (const auto &d : devices)
        if (whole(d) && d.name == std::to_string(index)) return d.qualified();
    return "";
}

}  // namespace sk::shim
