/* The files API on a started sandbox, the client's side (remote.h): each
 * operation is one CTL_FILE request (remote_call.h) that the monitor
 * runs with the library there, an fd passed for the bytes read or
 * written. What the monitor answers is checked before it is used: a name
 * comes as a string, or hex when it is not UTF-8. Apart from remote.c,
 * the handle and its runs, as one family of requests. */
#include <ctype.h>
#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "live/ctl.h"
#include "live/remote.h"
#include "live/remote_call.h"
#include "sandbox/sandbox.h"

static int file_call(nsbox_sandbox *sb, const char *op, const char *path, const char *arg, int fd, uint32_t flags,
                     json_t **out, nsbox_error **err)
{
	strs s = { 0 };
	remote_adds(&s, op);
	remote_adds(&s, path ? path : "");
	if (arg)
		remote_adds(&s, arg);
	ctl_req h = { .op = CTL_FILE, .flags = flags };
	return remote_call_json(sb, &h, &s, fd >= 0 ? &fd : NULL, fd >= 0, out, err);
}

int remote_file_read(nsbox_sandbox *sb, const char *path, int out_fd, uint64_t max, uint64_t *size,
                     nsbox_error **err)
{
	char num[24];
	snprintf(num, sizeof(num), "%llu", (unsigned long long) max);
	if (out_fd < 0)
		return nsbox_err(err, EBADF, "files", "read '%s': no output fd", path);
	json_t *j = NULL;
	int r = file_call(sb, "read", path, num, out_fd, 0, &j, err);
	if (r == 0 && size)
		*size = (uint64_t) json_integer_value(json_object_get(j, "size"));
	json_decref(j);
	return r;
}

int remote_file_write(nsbox_sandbox *sb, const char *path, int in_fd, unsigned mode, uint64_t max,
                      nsbox_error **err)
{
	char arg[48];
	snprintf(arg, sizeof(arg), "%llu:%o", (unsigned long long) max, mode);
	if (in_fd < 0)
		return nsbox_err(err, EINVAL, "files", "write '%s': no input fd", path);
	return file_call(sb, "write", path, arg, in_fd, 0, NULL, err);
}

/* KEY's string, or the bytes of KEY_hex (a name that is not UTF-8). */
static int name_from(json_t *o, const char *key, char **out)
{
	const char *s = json_string_value(json_object_get(o, key));
	char k[16];
	snprintf(k, sizeof(k), "%s_hex", key);
	const char *h = s ? NULL : json_string_value(json_object_get(o, k));
	size_t n = h ? strlen(h) : 0;
	if (!s && (!h || n % 2))
		return -EPROTO;
	*out = s ? strdup(s) : malloc(n / 2 + 1);
	if (!*out)
		return -ENOMEM;
	for (size_t i = 0; h && i < n / 2; i++) {
		unsigned v;
		if (sscanf(h + 2 * i, "%2x", &v) != 1 || v == 0 || !isxdigit((unsigned char) h[2 * i]) ||
		    !isxdigit((unsigned char) h[2 * i + 1]))
			return -EPROTO;
		(*out)[i] = (char) v;
	}
	if (h)
		(*out)[n / 2] = '\0';
	return 0;
}

static int info_from(json_t *o, nsbox_file_info *fi)
{
	const char *type = json_string_value(json_object_get(o, "type"));
	if (!type || strlen(type) != 1)
		return -EPROTO;
	int r = name_from(o, "name", &fi->name);
	r = r ?: name_from(o, "path", &fi->path);
	if (r < 0) {
		free(fi->name);
		free(fi->path);
		fi->name = fi->path = NULL;
		return r;
	}
	fi->type = type[0];
	fi->mode = (unsigned) json_integer_value(json_object_get(o, "mode"));
	fi->size = (uint64_t) json_integer_value(json_object_get(o, "size"));
	fi->mtime_ns = (int64_t) json_integer_value(json_object_get(o, "mtime_ns"));
	return fi->name && fi->path ? 0 : -ENOMEM;
}

int remote_file_list(nsbox_sandbox *sb, const char *path, nsbox_file_info **out, size_t *count, nsbox_error **err)
{
	json_t *j = NULL;
	*out = NULL;
	*count = 0;
	int r = file_call(sb, "list", path, NULL, -1, 0, &j, err);
	if (r < 0)
		return r;
	json_t *v = json_object_get(j, "entries");
	size_t n = json_array_size(v);
	nsbox_file_info *fi = calloc(n ? n : 1, sizeof(*fi));
	for (size_t i = 0; fi && i < n && r == 0; i++)
		r = info_from(json_array_get(v, i), &fi[i]);
	json_decref(j);
	if (!fi || r < 0) {
		nsbox_file_info_free(fi, n);
		return nsbox_err(err, fi ? -r : ENOMEM, "files", "list '%s'", path);
	}
	*out = fi;
	*count = n;
	return 0;
}

int remote_file_stat(nsbox_sandbox *sb, const char *path, nsbox_file_info *out, nsbox_error **err)
{
	json_t *j = NULL;
	int r = file_call(sb, "stat", path, NULL, -1, 0, &j, err);
	if (r == 0 && (r = info_from(j, out)) < 0)
		(void) nsbox_err(err, -r, "files", "stat '%s'", path);
	json_decref(j);
	return r;
}

int remote_file_remove(nsbox_sandbox *sb, const char *path, bool recursive, nsbox_error **err)
{
	return file_call(sb, "remove", path, NULL, -1, recursive ? CTL_RECURSIVE : 0, NULL, err);
}

int remote_file_mkdir(nsbox_sandbox *sb, const char *path, unsigned mode, nsbox_error **err)
{
	char m[16];
	snprintf(m, sizeof(m), "%o", mode);
	return file_call(sb, "mkdir", path, m, -1, 0, NULL, err);
}
