/* Loading YAML policy files (libyaml's document API keeps every node's
 * position, so errors can name file:line:column). */
#include <errno.h>
#include <libgen.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <yaml.h>

#include "base/cleanup.h"
#include "config/conf.h"
#include "base/error.h"
#include "base/yaml_walk.h"

const char *policy_builtin(const char *name);   /* policies_builtin.c, from policies/ */

typedef struct loader {
	nsbox_config *cfg;
	yaml_document_t *doc;
	const char *path;
	char *dir;          /* directory of the policy, for relative mount sources */
} loader;

#define perr(l, n, err, ...) yw_err(err, "policy", (l)->path, n, __VA_ARGS__)

static const char *type_name(const yaml_node_t *n)
{
	switch (n->type) {
	case YAML_SCALAR_NODE: return "a scalar";
	case YAML_SEQUENCE_NODE: return "a list";
	case YAML_MAPPING_NODE: return "a mapping";
	default: return "nothing";
	}
}

/* Set a key from a scalar node, turning config errors into positioned ones. */
static int set_at(loader *l, const yaml_node_t *n, const char *key, const char *value,
                  nsbox_error **err)
{
	char origin[PATH_MAX + 64];
	snprintf(origin, sizeof(origin), "%s:%zu:%zu", l->path, n->start_mark.line + 1,
	         n->start_mark.column + 1);
	int r = nsbox_config_set(l->cfg, key, value, origin, err);
	if (r < 0 && err && *err) {
		free((*err)->step);
		(*err)->step = strdup("policy");
	}
	return r;
}

static int load_mount_mapping(loader *l, yaml_node_t *n, nsbox_error **err)
{
	const char *src = NULL, *dst = NULL;
	bool ro = false;
	for (yaml_node_pair_t *p = n->data.mapping.pairs.start; p < n->data.mapping.pairs.top; p++) {
		yaml_node_t *k = yaml_document_get_node(l->doc, p->key);
		yaml_node_t *v = yaml_document_get_node(l->doc, p->value);
		const char *ks = yw_scalar(k), *vs = yw_scalar(v);
		if (!ks)
			return perr(l, k, err, "mount keys must be scalars");
		if (!vs)
			return perr(l, v, err, "'%s' must be a scalar, not %s", ks, type_name(v));
		if (!strcmp(ks, "source"))
			src = vs;
		else if (!strcmp(ks, "target"))
			dst = vs;
		else if (!strcmp(ks, "read_only")) {
			if (!strcmp(vs, "true"))
				ro = true;
			else if (strcmp(vs, "false"))
				return perr(l, v, err, "read_only must be true or false, not '%s'", vs);
		} else
			return perr(l, k, err, "unknown key '%s' in a mount (expected source, target, read_only)", ks);
	}
	if (!src || !dst)
		return perr(l, n, err, "a mount needs both 'source' and 'target'");
	char origin[PATH_MAX + 64];
	snprintf(origin, sizeof(origin), "%s:%zu:%zu", l->path, n->start_mark.line + 1,
	         n->start_mark.column + 1);
	int r = config_add_mount(l->cfg, src, dst, ro, l->dir, origin, err);
	if (r < 0 && err && *err) {
		free((*err)->step);
		(*err)->step = strdup("policy");
	}
	return r;
}

static int load_list(loader *l, const char *key, yaml_node_t *v, nsbox_error **err)
{
	(void) config_clear_list(l->cfg, key);
	bool env_map = !strcmp(key, "environment.set");
	if (env_map) {
		if (v->type != YAML_MAPPING_NODE)
			return perr(l, v, err, "'%s' must be a mapping of NAME: VALUE, not %s", key,
			            type_name(v));
		for (yaml_node_pair_t *p = v->data.mapping.pairs.start; p < v->data.mapping.pairs.top; p++) {
			yaml_node_t *kn = yaml_document_get_node(l->doc, p->key);
			yaml_node_t *vn = yaml_document_get_node(l->doc, p->value);
			if (!yw_scalar(kn) || !yw_scalar(vn))
				return perr(l, yw_scalar(kn) ? vn : kn, err, "'%s' entries must be scalars", key);
			_cleanup_free_ char *kv = NULL;
			if (asprintf(&kv, "%s=%s", yw_scalar(kn), yw_scalar(vn)) < 0)
				return nsbox_err(err, ENOMEM, "policy", "load '%s'", l->path);
			int r = set_at(l, kn, key, kv, err);
			if (r < 0)
				return r;
		}
		return 0;
	}
	if (v->type != YAML_SEQUENCE_NODE)
		return perr(l, v, err, "'%s' must be a list, not %s", key, type_name(v));
	for (yaml_node_item_t *it = v->data.sequence.items.start; it < v->data.sequence.items.top; it++) {
		yaml_node_t *e = yaml_document_get_node(l->doc, *it);
		int r;
		if (!strcmp(key, "filesystem.mounts") && e->type == YAML_MAPPING_NODE)
			r = load_mount_mapping(l, e, err);
		else if (!yw_scalar(e))
			r = perr(l, e, err, "'%s' entries must be scalars, not %s", key, type_name(e));
		else
			r = set_at(l, e, key, yw_scalar(e), err);
		if (r < 0)
			return r;
	}
	return 0;
}

static int load_value(loader *l, const char *key, yaml_node_t *v, nsbox_error **err)
{
	if (config_key_is_list(key))
		return load_list(l, key, v, err);
	if (!yw_scalar(v))
		return perr(l, v, err, "'%s' must be a scalar, not %s", key, type_name(v));
	return set_at(l, v, key, yw_scalar(v), err);
}

static const char *const sections[] = {
	"limits", "network", "filesystem", "workspace", "environment", "security", "files",
	"audit", "code",   /* config_audit.c */
};

/* Walk a mapping; `prefix` is the section name or NULL at the top. */
static int load_mapping(loader *l, const char *prefix, yaml_node_t *m, nsbox_error **err)
{
	for (yaml_node_pair_t *p = m->data.mapping.pairs.start; p < m->data.mapping.pairs.top; p++) {
		yaml_node_t *k = yaml_document_get_node(l->doc, p->key);
		yaml_node_t *v = yaml_document_get_node(l->doc, p->value);
		const char *ks = yw_scalar(k);
		if (!ks)
			return perr(l, k, err, "keys must be scalars");
		for (yaml_node_pair_t *q = m->data.mapping.pairs.start; q < p; q++) {
			const char *prev = yw_scalar(yaml_document_get_node(l->doc, q->key));
			if (prev && !strcmp(prev, ks))
				return perr(l, k, err, "duplicate key '%s'", ks);
		}
		if (!prefix) {
			bool is_section = false;
			for (size_t i = 0; i < ARRAY_SIZE(sections); i++)
				is_section |= !strcmp(ks, sections[i]);
			if (is_section) {
				if (v->type == YAML_SCALAR_NODE && !*yw_scalar(v))
					continue;   /* "limits:" with nothing under it */
				if (v->type != YAML_MAPPING_NODE)
					return perr(l, v, err, "'%s' must be a mapping, not %s", ks, type_name(v));
				int r = load_mapping(l, ks, v, err);
				if (r < 0)
					return r;
				continue;
			}
		}
		char key[128];
		snprintf(key, sizeof(key), "%s%s%s", prefix ? prefix : "", prefix ? "." : "", ks);
		if (!config_key_known(key))
			return perr(l, k, err, "unknown key '%s'", key);
		int r = load_value(l, key, v, err);
		if (r < 0)
			return r;
	}
	return 0;
}

int nsbox_config_load_policy(nsbox_config *cfg, const char *path, nsbox_error **err)
{
	if (!cfg || !path)
		return nsbox_err_invalid(err, "policy", "load policy: missing argument");
	/* A bare name ("deps") is a policy shipped with nsbox; a file of that
	 * name is "./deps". */
	const char *shipped = strchr(path, '/') ? NULL : policy_builtin(path);
	FILE *f = shipped ? NULL : fopen(path, "re");
	if (!f && !shipped) {
		if (errno == ENOENT && !strchr(path, '/'))
			return nsbox_err_hint(err, ENOENT, "policy", "shipped policies: standard, deps, untrusted, trusted",
			                      "open policy '%s': no such file, nor a shipped policy of that name", path);
		return nsbox_err(err, errno, "policy", "open policy '%s'", path);
	}
	yaml_parser_t parser;
	yaml_document_t doc;
	if (!yaml_parser_initialize(&parser)) {
		if (f)
			fclose(f);
		return nsbox_err(err, ENOMEM, "policy", "load policy '%s'", path);
	}
	if (shipped)
		yaml_parser_set_input_string(&parser, (const unsigned char *) shipped, strlen(shipped));
	else
		yaml_parser_set_input_file(&parser, f);
	int r = 0;
	if (!yaml_parser_load(&parser, &doc)) {
		r = nsbox_err_invalid(err, "policy", "%s:%zu:%zu: %s%s%s", path,
		              parser.problem_mark.line + 1, parser.problem_mark.column + 1,
		              parser.problem ? parser.problem : "invalid YAML",
		              parser.context ? " " : "", parser.context ? parser.context : "");
		yaml_parser_delete(&parser);
		if (f)
			fclose(f);
		return r;
	}
	yaml_parser_delete(&parser);
	if (f)
		fclose(f);

	char real[PATH_MAX];
	loader l = { .cfg = cfg, .doc = &doc, .path = path };
	if (!shipped && realpath(path, real))
		l.dir = strdup(dirname(real));
	yaml_node_t *root = yaml_document_get_root_node(&doc);
	if (!root || (root->type == YAML_SCALAR_NODE && !*yw_scalar(root)))
		r = 0;   /* an empty policy changes nothing */
	else if (root->type != YAML_MAPPING_NODE)
		r = perr(&l, root, err, "a policy must be a mapping, not %s", type_name(root));
	else
		r = load_mapping(&l, NULL, root, err);
	free(l.dir);
	yaml_document_delete(&doc);
	return r;
}
