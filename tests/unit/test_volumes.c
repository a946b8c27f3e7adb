#include <check.h>
#include <stdlib.h>

#include "config/volumes.h"
#include "unit.h"

static const struct { const char *src, *rule; bool forbidden; } rules[] = {
	{ "/home/u/.ssh", "/home/u/.ssh", true },
	{ "/home/u/.ssh/id_rsa", "/home/u/.ssh", true },
	{ "/home/u", "/home/u/.ssh", true },          /* contains it */
	{ "/home", "/home/u/.ssh", true },
	{ "/home/u/.sshd", "/home/u/.ssh", false },    /* a sibling with a longer name */
	{ "/home/u/project", "/home/u/.ssh", false },
	{ "/", "/", true },
	{ "/tmp", "/", false },                        /* "/" forbids only itself */
	{ "/etc", "/etc/shadow", true },
	{ "/etc/hosts", "/etc/shadow", false },
	{ "/proc/1", "/proc", true },
};

START_TEST(test_rules)
{
	ck_assert_msg(path_forbidden_by(rules[_i].src, rules[_i].rule) == rules[_i].forbidden,
	              "'%s' vs rule '%s'", rules[_i].src, rules[_i].rule);
}
END_TEST

START_TEST(test_expand_home)
{
	char *p = path_expand_home("~/.ssh", "/home/u");
	ck_assert_str_eq(p, "/home/u/.ssh");
	free(p);
	p = path_expand_home("~", "/home/u");
	ck_assert_str_eq(p, "/home/u");
	free(p);
	p = path_expand_home("/abs", NULL);
	ck_assert_str_eq(p, "/abs");
	free(p);
	ck_assert_ptr_null(path_expand_home("~/x", NULL));
	p = path_expand_home("~user/x", "/home/u");   /* not our home: literal */
	ck_assert_str_eq(p, "~user/x");
	free(p);
}
END_TEST

int main(void)
{
	TCase *tc = tcase_create("volumes");
	tcase_add_loop_test(tc, test_rules, 0, sizeof(rules) / sizeof(rules[0]));
	tcase_add_test(tc, test_expand_home);
	return unit_run("volumes", tc);
}
