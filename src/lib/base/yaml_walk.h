/* Walking libyaml documents: loops over mappings and sequences. */
#ifndef NSBOX_YAML_WALK_H
#define NSBOX_YAML_WALK_H

#include <yaml.h>

#include "base/error.h"

#define YW_CAT_(a, b) a##b
#define YW_CAT(a, b) YW_CAT_(a, b)

static inline const char *yw_scalar(const yaml_node_t *n)
{
	return n && n->type == YAML_SCALAR_NODE ? (const char *) n->data.scalar.value : NULL;
}

/* An input error at node n of file origin: "ORIGIN:LINE:COL: message". */
#define yw_err(err, step, origin, n, ...)                                                        \
	nsbox_err_at((err), (step), (origin), (size_t) (n)->start_mark.line + 1,                   \
	             (size_t) (n)->start_mark.column + 1, __VA_ARGS__)

/* for each key/value of mapping m in document doc (nestable on other lines) */
#define yw_pairs(doc, m, kn, vn)                                                                 \
	for (yaml_node_pair_t *YW_CAT(yw_p, __LINE__) = (m)->data.mapping.pairs.start;               \
	     YW_CAT(yw_p, __LINE__) < (m)->data.mapping.pairs.top; YW_CAT(yw_p, __LINE__)++)          \
		for (yaml_node_t *kn = yaml_document_get_node((doc), YW_CAT(yw_p, __LINE__)->key),       \
		                 *vn = yaml_document_get_node((doc), YW_CAT(yw_p, __LINE__)->value);     \
		     kn; kn = NULL)

/* for each item of sequence s */
#define yw_items(doc, s, it)                                                                     \
	for (yaml_node_item_t *YW_CAT(yw_i, __LINE__) = (s)->data.sequence.items.start;              \
	     YW_CAT(yw_i, __LINE__) < (s)->data.sequence.items.top; YW_CAT(yw_i, __LINE__)++)         \
		for (yaml_node_t *it = yaml_document_get_node((doc), *YW_CAT(yw_i, __LINE__)); it; it = NULL)

#endif
