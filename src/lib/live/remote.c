/* The client's side of a started sandbox (remote.h): each operation is one
 * connection to the monitor, one request, its frames, one reply. The
 * monitor runs it with the library there, governed by the sandbox's
 * configuration; the record it sends is the record (result_from_json).
 * Here: the request itself (remote_call.h), the handle, runs and
 * contexts; the files and the processes operations are in
 * remote_files.c and remote_procs.c. */
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include "base/buf.h"
#include "base/error.h"
#include "code/context.h"
#include "code/lang.h"
#include "live/ctl.h"
#include "live/remote.h"
#include "live/remote_call.h"
#include "sandbox/sandbox.h"

/* ---- one request --------------------------------------------------------------- */

void remote_add(strs *s, const char *v, size_t len)
{
	if (memchr(v, '\0', len)) {
		s->bad = true;
		return;
	}
	buf_append(&s->b, v, len);
	buf_append(&s->b, "", 1);
	s->n++;
}

void remote_adds(strs *s, const char *v) { remote_add(s, v, strlen(v)); }

/* Read a frame's data, at most max bytes (-EPROTO past it). */
static int read_frame(int fd, ctl_frame *f, char **data, uint32_t max)
{
	int r = ctl_read_all(fd, f, sizeof(*f));
	if (r < 0)
		return r;
	if (f->len > max)
		return -EPROTO;
	*data = malloc((size_t) f->len + 1);
	if (!*data)
		return -ENOMEM;
	r = ctl_read_all(fd, *data, f->len);
	if (r < 0) {
		free(*data);
		*data = NULL;
		return r;
	}
	(*data)[f->len] = '\0';
	return 0;
}

/* Send the request, pass signals on while it runs, hand the output frames
 * to io, and return the reply: *status and *json (malloc'ed). */
int remote_call(nsbox_sandbox *sb, ctl_req *h, strs *s, const int *fds, int nfds, const call_io *io, int32_t *status,
                char **json, nsbox_error **err)
{
	live_remote *rm = sb->remote;
	*json = NULL;
	if (s && (s->bad || s->b.oom))
		return nsbox_err_invalid(err, "live", "sandbox '%s': a string of the request holds a NUL byte", rm->name);
	if (s && (s->b.len > CTL_MAX || s->n > CTL_STRINGS_MAX))
		return nsbox_err_invalid(err, "live", "sandbox '%s': the request is longer than %u bytes", rm->name,
		                         CTL_MAX);
	h->magic = CTL_MAGIC;
	h->len = s ? (uint32_t) s->b.len : 0;
	h->argc = s ? s->n : 0;
	int fd = ctl_connect(rm->name, err);
	if (fd < 0)
		/* Ended since the handle was made; a name that was never
		 * there (the handle's first call, no id yet) is only that. */
		return fd == -ESRCH && rm->id[0] ? nsbox_err_prefix(err, -ESRCH, "the sandbox has ended") : fd;
	int r = ctl_send_req(fd, h, s ? s->b.data : "", fds, nfds);
	if (r < 0) {
		close(fd);
		return nsbox_err(err, -r, "live", "sandbox '%s': send the request", rm->name);
	}
	if (io && io->cancel)
		cancel_attach_remote(io->cancel, fd);
	ctl_frame f;
	char *data = NULL;
	for (;;) {
		struct pollfd p[2] = { { .fd = fd, .events = POLLIN },
			               { .fd = io ? io->signal_fd : -1, .events = POLLIN } };
		if (poll(p, 2, -1) < 0) {
			if (errno == EINTR)
				continue;
			r = -errno;
			break;
		}
		if (io && (p[1].revents & POLLIN)) {
			struct signalfd_siginfo si;
			while (read(io->signal_fd, &si, sizeof(si)) == (ssize_t) sizeof(si)) {
				unsigned char b = (unsigned char) si.ssi_signo;
				(void) ctl_write_all(fd, &b, 1);
			}
		}
		if (!p[0].revents)
			continue;
		r = read_frame(fd, &f, &data, CTL_REPLY_MAX);
		if (r < 0)
			break;
		if (f.type == CTL_REPLY) {
			if (f.len < sizeof(int32_t)) {
				r = -EPROTO;
				break;
			}
			memcpy(status, data, sizeof(int32_t));
			memmove(data, data + sizeof(int32_t), f.len - sizeof(int32_t) + 1);
			*json = data;
			data = NULL;
			break;
		}
		if ((f.type == CTL_OUT || f.type == CTL_ERR) && io && io->on_output)
			io->on_output(io->output_userdata, (int) f.type, data, f.len);
		else if (f.type == CTL_WARN && io && io->on_warning)
			io->on_warning(io->warning_userdata, data);
		else if (f.type != CTL_OUT && f.type != CTL_ERR && f.type != CTL_WARN)
			r = -EPROTO;
		free(data);
		data = NULL;
		if (r < 0)
			break;
	}
	if (io && io->cancel)
		cancel_detach_remote(io->cancel);
	close(fd);
	free(data);
	if (r < 0)
		return r == -EPIPE ? nsbox_err(err, EPIPE, "live", "sandbox '%s' ended before it answered", rm->name)
		                   : nsbox_err(err, -r, "live", "sandbox '%s': read the answer", rm->name);
	return 0;
}

/* A request whose reply is data or an error: its JSON parsed (the caller
 * decrefs), or -errno with *err from the monitor's error. */
int remote_call_json(nsbox_sandbox *sb, ctl_req *h, strs *s, const int *fds, int nfds, json_t **out,
                     nsbox_error **err)
{
	int32_t status = 0;
	char *text = NULL;
	int r = remote_call(sb, h, s, fds, nfds, NULL, &status, &text, err);
	buf_free(&s->b);
	if (r < 0)
		return r;
	if (status < 0) {
		nsbox_error *e = ctl_error_from_json(text);
		free(text);
		if (err) {
			*err = e;
			if (!e)
				(void) nsbox_err(err, -status, "live", "sandbox '%s'", sb->remote->name);
		} else {
			nsbox_error_free(e);
		}
		return status;
	}
	json_t *j = json_loads(text ? text : "{}", JSON_REJECT_DUPLICATES, NULL);
	free(text);
	if (!json_is_object(j) && !json_is_array(j)) {
		json_decref(j);
		return nsbox_err(err, EPROTO, "live", "sandbox '%s': an answer that is not JSON", sb->remote->name);
	}
	if (out)
		*out = j;
	else
		json_decref(j);
	return 0;
}

static int simple(nsbox_sandbox *sb, uint32_t op, strs *s, nsbox_error **err)
{
	ctl_req h = { .op = op };
	strs none = { 0 };
	return remote_call_json(sb, &h, s ? s : &none, NULL, 0, NULL, err);
}

/* ---- the handle ------------------------------------------------------------------ */

int remote_open(const char *name, bool owner, nsbox_sandbox **out, nsbox_error **err)
{
	*out = NULL;
	nsbox_sandbox *sb = calloc(1, sizeof(*sb));
	live_remote *rm = calloc(1, sizeof(*rm));
	if (!sb || !rm) {
		free(sb);
		free(rm);
		return nsbox_err(err, ENOMEM, "live", "open sandbox '%s'", name);
	}
	sb->remote = rm;
	sb->pidfd = sb->sync_fd = sb->out_fd[0] = sb->out_fd[1] = -1;
	snprintf(rm->name, sizeof(rm->name), "%s", name);
	rm->owner = owner;
	ctl_req h = { .op = CTL_INFO };
	strs s = { 0 };
	json_t *info = NULL;
	int r = remote_call_json(sb, &h, &s, NULL, 0, &info, err);
	if (r == 0) {
		const char *id = json_string_value(json_object_get(info, "id"));
		const char *w = json_string_value(json_object_get(info, "warning"));
		const char *by = json_string_value(json_object_get(info, "enforced_by"));
		snprintf(rm->id, sizeof(rm->id), "%s", id ? id : "");
		rm->warning = w && *w ? strdup(w) : NULL;
		rm->enforced_by = by ? strdup(by) : NULL;
		json_decref(info);
	}
	if (r < 0) {
		rm->owner = false;
		remote_free(sb);
		return r;
	}
	*out = sb;
	return 0;
}

int remote_stop(nsbox_sandbox *sb)
{
	/* This sandbox, by its id: never another that took the name since. */
	return live_stop_id(sb->remote->name, sb->remote->id[0] ? sb->remote->id : NULL, NULL);
}

void remote_free(nsbox_sandbox *sb)
{
	live_remote *rm = sb->remote;
	if (rm->owner)
		(void) remote_stop(sb);
	free(rm->warning);
	free(rm->enforced_by);
	free(rm);
	free(sb);
}

int remote_pause(nsbox_sandbox *sb, bool pause, nsbox_error **err)
{
	return simple(sb, pause ? CTL_PAUSE : CTL_RESUME, NULL, err);
}

int remote_config(nsbox_sandbox *sb, char **yaml, nsbox_error **err)
{
	ctl_req h = { .op = CTL_CONFIG };
	strs s = { 0 };
	json_t *j = NULL;
	int r = remote_call_json(sb, &h, &s, NULL, 0, &j, err);
	const char *y = r == 0 ? json_string_value(json_object_get(j, "config")) : NULL;
	*yaml = y ? strdup(y) : NULL;
	json_decref(j);
	if (r == 0 && !*yaml)
		r = nsbox_err(err, EPROTO, "live", "sandbox '%s': no configuration in the answer", sb->remote->name);
	return r;
}

bool remote_paused(nsbox_sandbox *sb)
{
	ctl_req h = { .op = CTL_INFO };
	strs s = { 0 };
	json_t *info = NULL;
	if (remote_call_json(sb, &h, &s, NULL, 0, &info, NULL) < 0)
		return false;
	bool p = json_is_true(json_object_get(info, "paused"));
	json_decref(info);
	return p;
}

int remote_expose(nsbox_sandbox *sb, const char *host_addr, uint16_t host_port, uint16_t port, uint16_t *bound,
                  nsbox_error **err)
{
	char a[8], b[8];
	snprintf(a, sizeof(a), "%u", (unsigned) port);
	snprintf(b, sizeof(b), "%u", (unsigned) host_port);
	strs s = { 0 };
	remote_adds(&s, a);
	remote_adds(&s, host_addr ? host_addr : "127.0.0.1");
	remote_adds(&s, b);
	ctl_req h = { .op = CTL_EXPOSE };
	json_t *j = NULL;
	int r = remote_call_json(sb, &h, &s, NULL, 0, &j, err);
	if (r == 0 && bound)
		*bound = (uint16_t) json_integer_value(json_object_get(j, "host_port"));
	json_decref(j);
	return r;
}

/* ---- runs ------------------------------------------------------------------------ */

int remote_run(const nsbox_run_options *o, nsbox_sandbox *sb, nsbox_context *ctx, nsbox_result **out,
               nsbox_error **err)
{
	*out = NULL;
	ctl_req h = { .timeout_ms = o->timeout_ms };
	strs s = { 0 };
	bool captured = o->flags & NSBOX_SPAWN_CAPTURE;
	if (captured)
		h.flags |= CTL_CAPTURE;
	if (o->on_output)
		h.flags |= CTL_STREAM;
	int fds[3], nfds = 0;
	if (ctx) {
		h.op = CTL_CELL;
		if (o->lang && strcmp(o->lang, nsbox_context_language(ctx)))
			return nsbox_err_invalid(err, "context", "run a cell: context '%s' is a %s context, not %s",
			                         nsbox_context_name(ctx), nsbox_context_language(ctx), o->lang);
		remote_adds(&s, nsbox_context_name(ctx));
		remote_adds(&s, nsbox_context_language(ctx));
		remote_add(&s, o->code ? o->code : "", o->code ? o->code_len : 0);
	} else {
		h.op = CTL_EXEC;
		if (o->flags & NSBOX_SPAWN_TTY)
			h.flags |= CTL_TTY;
		if (o->workdir) {
			h.flags |= CTL_WORKDIR;
			remote_adds(&s, o->workdir);
		}
		if (o->code) {
			h.flags |= CTL_CODE;
			remote_adds(&s, o->lang ? o->lang : "");
			remote_add(&s, o->code, o->code_len);
		} else {
			for (const char *const *a = o->argv; a && *a; a++)
				remote_adds(&s, *a);
		}
		uint32_t argc = s.n - (o->workdir ? 1 : 0);
		if (o->envp) {
			h.flags |= (o->flags & NSBOX_EXEC_ENV_ADD) ? CTL_ENV_ADD : CTL_ENV;
			for (const char *const *e = o->envp; *e; e++, h.env++)
				remote_adds(&s, *e);
		}
		if (!argc)
			return buf_free(&s.b), nsbox_err_invalid(err, "run", "run in sandbox '%s': no command",
			                                        sb->remote->name);
		if (o->stdin_fd >= 0) {
			h.flags |= CTL_STDIN;
			fds[nfds++] = o->stdin_fd;
		}
	}
	if (!captured && !o->on_output) {
		/* The output passes through to the caller's fds (relayed by the
		 * monitor's library, as an exec here relays it). */
		h.flags |= CTL_STDOUT;
		fds[nfds++] = o->stdout_fd >= 0 ? o->stdout_fd : 1;
		fds[nfds++] = o->stderr_fd >= 0 ? o->stderr_fd : 2;
	}
	call_io io = { .on_output = o->on_output, .output_userdata = o->output_userdata, .on_warning = o->on_warning,
		       .warning_userdata = o->warning_userdata, .signal_fd = o->signal_fd, .cancel = o->cancel };
	int32_t status = 0;
	char *text = NULL;
	int r = remote_call(sb, &h, &s, fds, nfds, &io, &status, &text, err);
	buf_free(&s.b);
	if (r < 0)
		return r;
	if (status < 0) {
		/* Refused before it ran (-ECANCELED: cancelled first). */
		nsbox_error *e = ctl_error_from_json(text);
		free(text);
		if (err)
			*err = e ? e : NULL;
		else
			nsbox_error_free(e);
		if (err && !*err)
			(void) nsbox_err(err, -status, "run", "run in sandbox '%s'", sb->remote->name);
		return status;
	}
	r = result_from_json(text, out, err);
	free(text);
	return r;
}

/* ---- contexts -------------------------------------------------------------------- */

int remote_context_new(nsbox_sandbox *sb, const char *lang, const char *name, bool *created, nsbox_error **err)
{
	strs s = { 0 };
	remote_adds(&s, name);
	remote_adds(&s, lang);
	ctl_req h = { .op = CTL_CONTEXT_NEW };
	json_t *j = NULL;
	int r = remote_call_json(sb, &h, &s, NULL, 0, &j, err);
	*created = r == 0 && json_is_true(json_object_get(j, "created"));
	json_decref(j);
	return r;
}

int remote_context_op(nsbox_sandbox *sb, int op, const char *name, nsbox_error **err)
{
	strs s = { 0 };
	remote_adds(&s, name);
	return simple(sb, (uint32_t) op, &s, err);
}
