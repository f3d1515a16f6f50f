// Container runtime templates (pure). Admins map image patterns to a command
// template, e.g. in runtime.conf:
//
//   template = docker.io/* apptainer exec --nv docker://{image} {command}
//
// The pattern is an fnmatch(3) glob over the container's image; the first
// matching line wins. The template is split on spaces; a word "{command}"
// becomes the container's command+args (zero or more words), "{image}" and
// "{name}" are replaced inside any word. Without a matching template the
// process runtime runs command+args directly, and a container without a
// command is refused (there is no image to take an entrypoint from).
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "common/result.h"

namespace sk::shim {

struct RuntimeTemplate {
    std::string pattern;
    std::vector<std::string> words;
};

class RuntimeTemplates {
  public:
    // Parses runtime.conf text (key = value lines, '#' comments); keys:
    // template (repeatable). Unknown keys are errors naming the line.
    static Result<RuntimeTemplates> parse(std::string_view text, std::string_view source);
    Status add(const std::string &value, const std::string &where);

    const RuntimeTemplate *match(const std::string &image) const;
    // argv for `command` run from `image` through template t.
    static std::vector<std::string> expand(const RuntimeTemplate &t, const std::string &image,
                                           const std::string &name,
                                           const std::vector<std::string> &command);
    size_t size() const { return templates_.size(); }

  private:
    std::vector<RuntimeTemplate> templates_;
};

}  // namespace sk::shim
