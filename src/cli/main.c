#include <string.h>

#include "cli.h"

int main(int argc, char **argv)
{
	/* Installed as nsbox-docker too (a link to nsbox), which a user may
	 * link as docker: under those names it is `nsbox docker`. */
	const char *slash = argc > 0 ? strrchr(argv[0], '/') : NULL;
	const char *self = slash ? slash + 1 : argc > 0 ? argv[0] : "";
	if (!strcmp(self, "nsbox-docker") || !strcmp(self, "docker"))
		return cmd_docker(argc, argv);
	return cli_main(argc, argv);
}
