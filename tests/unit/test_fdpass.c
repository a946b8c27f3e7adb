/* base/fdpass: the one SCM_RIGHTS pair. What a peer sends beyond what the
 * receiver expects is closed and the message fails: no fd is left behind. */
#include <check.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "base/fdpass.h"
#include "unit.h"

/* How many fds this process holds (the directory stream's own excluded). */
static int open_fds(void)
{
	DIR *d = opendir("/proc/self/fd");
	ck_assert_ptr_nonnull(d);
	int n = 0;
	for (struct dirent *e; (e = readdir(d));)
		if (e->d_name[0] != '.')
			n++;
	closedir(d);
	return n - 1;
}

static void pair(int sv[2])
{
	ck_assert_int_eq(socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv), 0);
}

/* Send `n` fds (copies of /dev/null) with one byte, as a raw sendmsg would:
 * more than fd_send allows, as a hostile peer may. */
static void send_raw(int sock, int n)
{
	int fds[16];
	ck_assert_int_le(n, 16);
	for (int i = 0; i < n; i++)
		ck_assert_int_ge(fds[i] = open("/dev/null", O_RDONLY | O_CLOEXEC), 0);
	union {
		char buf[CMSG_SPACE(16 * sizeof(int))];
		struct cmsghdr align;
	} u;
	memset(&u, 0, sizeof(u));
	char one = 'x';
	struct iovec iov = { &one, 1 };
	struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = u.buf,
	                     .msg_controllen = CMSG_SPACE((size_t) n * sizeof(int)) };
	struct cmsghdr *c = CMSG_FIRSTHDR(&mh);
	c->cmsg_level = SOL_SOCKET;
	c->cmsg_type = SCM_RIGHTS;
	c->cmsg_len = CMSG_LEN((size_t) n * sizeof(int));
	memcpy(CMSG_DATA(c), fds, (size_t) n * sizeof(int));
	ck_assert_int_eq(sendmsg(sock, &mh, MSG_NOSIGNAL), 1);
	for (int i = 0; i < n; i++)
		close(fds[i]);
}

START_TEST(test_round_trip)
{
	int sv[2];
	pair(sv);
	int p[2];
	ck_assert_int_eq(pipe2(p, O_CLOEXEC), 0);
	ck_assert_int_eq(fd_send(sv[0], "hi", 2, p, 2), 2);
	close(p[0]);
	close(p[1]);
	int base = open_fds();
	char buf[8];
	int got[2] = { -1, -1 }, n = -1;
	ck_assert_int_eq(fd_recv(sv[1], buf, sizeof(buf), got, 2, &n, 0), 2);
	ck_assert_int_eq(n, 2);
	ck_assert_int_eq(memcmp(buf, "hi", 2), 0);
	ck_assert_int_eq(open_fds(), base + 2);
	/* Close-on-exec, always: an fd from a peer never reaches a payload. */
	for (int i = 0; i < 2; i++)
		ck_assert(fcntl(got[i], F_GETFD) & FD_CLOEXEC);
	/* They are the pipe's two ends. */
	ck_assert_int_eq(write(got[1], "z", 1), 1);
	ck_assert_int_eq(read(got[0], buf, 1), 1);
	ck_assert_int_eq(buf[0], 'z');
	close(got[0]);
	close(got[1]);
	/* No fds at all is a message too; EOF is 0. */
	ck_assert_int_eq(fd_send(sv[0], "a", 1, NULL, 0), 1);
	ck_assert_int_eq(fd_recv(sv[1], buf, sizeof(buf), got, 1, &n, 0), 1);
	ck_assert_int_eq(n, 0);
	close(sv[0]);
	ck_assert_int_eq(fd_recv(sv[1], buf, sizeof(buf), got, 1, &n, 0), 0);
	ck_assert_int_eq(n, 0);
	close(sv[1]);
}
END_TEST

/* A message with `sent` fds, received with room for `maxfds` (fds NULL when
 * `no_array`): refused (-EBADMSG), none of its fds left open. */
static void refused(int sent, int maxfds, bool no_array)
{
	int sv[2];
	pair(sv);
	send_raw(sv[0], sent);
	int base = open_fds();
	char buf[4];
	int fds[FDPASS_MAX + 1], n = -1;
	ck_assert_int_eq(fd_recv(sv[1], buf, sizeof(buf), no_array ? NULL : fds, maxfds, &n, 0), -EBADMSG);
	ck_assert_int_eq(n, 0);
	ck_assert_int_eq(open_fds(), base);
	close(sv[0]);
	close(sv[1]);
}

/* Two fds where one is expected: the call fails and both are closed; the
 * socket goes on, its next message read whole. */
START_TEST(test_extra_fd_fails_and_leaks_nothing)
{
	refused(2, 1, false);
	int sv[2];
	pair(sv);
	send_raw(sv[0], 2);
	char buf[4];
	int fd = -7, n = -1;
	ck_assert_int_eq(fd_recv(sv[1], buf, sizeof(buf), &fd, 1, &n, 0), -EBADMSG);
	int p[2];
	ck_assert_int_eq(pipe2(p, O_CLOEXEC), 0);
	ck_assert_int_eq(fd_send(sv[0], "k", 1, p, 1), 1);
	close(p[0]);
	ck_assert_int_eq(fd_recv(sv[1], buf, sizeof(buf), &fd, 1, &n, 0), 1);
	ck_assert_int_eq(n, 1);
	ck_assert_int_eq(write(p[1], "q", 1), 1);
	ck_assert_int_eq(read(fd, buf, 1), 1);
	close(fd);
	close(p[1]);
	close(sv[0]);
	close(sv[1]);
}
END_TEST

/* Fds where none is expected (maxfds 0, or no array) fail likewise; so
 * does a message with more fds than the control buffer holds, which the
 * kernel cuts (MSG_CTRUNC). */
START_TEST(test_unexpected_and_cut)
{
	refused(1, 0, false);
	refused(1, 1, true);
	refused(FDPASS_MAX + 4, FDPASS_MAX, false);
}
END_TEST

START_TEST(test_send_bounds)
{
	int sv[2];
	pair(sv);
	int fds[FDPASS_MAX + 1];
	for (int i = 0; i <= FDPASS_MAX; i++)
		fds[i] = sv[0];
	ck_assert_int_eq(fd_send(sv[0], "x", 1, fds, FDPASS_MAX + 1), -EINVAL);
	ck_assert_int_eq(fd_send(sv[0], "x", 1, fds, -1), -EINVAL);
	ck_assert_int_eq(fd_send(sv[0], "", 0, fds, 1), -EINVAL);
	/* A peer that is gone: -EPIPE, no SIGPIPE. */
	close(sv[1]);
	ck_assert_int_eq(fd_send(sv[0], "x", 1, fds, 1), -EPIPE);
	close(sv[0]);
}
END_TEST

int main(void)
{
	TCase *tc = tcase_create("fdpass");
	tcase_add_test(tc, test_round_trip);
	tcase_add_test(tc, test_extra_fd_fails_and_leaks_nothing);
	tcase_add_test(tc, test_unexpected_and_cut);
	tcase_add_test(tc, test_send_bounds);
	return unit_run("fdpass", tc);
}
