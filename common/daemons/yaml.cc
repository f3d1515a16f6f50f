#include "common/daemons/yaml.h"

#include <yaml.h>

#include <string>

namespace sk {
namespace {

constexpr int kMaxDepth = 32;

// A libyaml document node as JSON: mappings -> objects, sequences -> arrays,
// every scalar a string (the kubeconfig's fields are strings; "true" is
// compared as text). Aliases are resolved by libyaml's document loader.
Result<Json::Value> to_json(yaml_document_t *doc, yaml_node_t *node, int depth) {
    if (!node) return Json::Value();
    if (depth > kMaxDepth) return fail(Error::Parse, "nested deeper than 32 levels");
    switch (node->type) {
        case YAML_SCALAR_NODE: {
            std::string v(reinterpret_cast<const char *>(node->data.scalar.value),
                          node->data.scalar.length);
            // A plain `~`/`null`/empty scalar is YAML's null.
            if (node->data.scalar.style == YAML_PLAIN_SCALAR_STYLE &&
                (v.empty() || v == "~" || v == "null" || v == "Null" || v == "NULL"))
                return Json::Value();
            return Json::Value(v);
        }
        case YAML_SEQUENCE_NODE: {
            Json::Value a(Json::arrayValue);
            for (auto *it = node->data.sequence.items.start; it < node->data.sequence.items.top;
                 ++it) {
                auto v = to_json(doc, yaml_document_get_node(doc, *it), depth + 1);
                if (!v) return v;
                a.append(*v);
            }
            return a;
        }
        case YAML_MAPPING_NODE: {
            Json::Value o(Json::objectValue);
            for (auto *p = node->data.mapping.pairs.start; p < node->data.mapping.pairs.top; ++p) {
                yaml_node_t *k = yaml_document_get_node(doc, p->key);
                if (!k || k->type != YAML_SCALAR_NODE)
                    return fail(Error::Parse, "a mapping key that is not a string");
                std::string key(reinterpret_cast<const char *>(k->data.scalar.value),
                                k->data.scalar.length);
                auto v = to_json(doc, yaml_document_get_node(doc, p->value), depth + 1);
                if (!v) return v;
                o[key] = *v;
            }
            return o;
        }
        default:
            return Json::Value();
    }
}

}  // namespace

Result<Json::Value> parse_yaml(std::string_view text) {
    yaml_parser_t parser;
    if (!yaml_parser_initialize(&parser)) return fail(Error::Internal, "yaml_parser_initialize");
    yaml_parser_set_input_string(&parser, reinterpret_cast<const unsigned char *>(text.data()),
                                 text.size());
    yaml_document_t doc;
    if (!yaml_parser_load(&parser, &doc)) {
        std::string why = parser.problem ? parser.problem : "malformed YAML";
        size_t line = parser.problem_mark.line + 1;
        yaml_parser_delete(&parser);
        return fail(Error::Parse, "line " + std::to_string(line) + ": " + why);
    }
    auto v = to_json(&doc, yaml_document_get_root_node(&doc), 0);
    yaml_document_delete(&doc);
    yaml_parser_delete(&parser);
    return v;
}

}  // namespace sk
