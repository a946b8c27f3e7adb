# The libFuzzer build of the harnesses, run by `make fuzz` (Makefile.am
# passes every variable below). A plain GNU make file: automake has no
# per-target compiler, and the library must be compiled again with clang,
# coverage instrumentation and the sanitizers.
#
#   srcdir builddir  the trees
#   FUZZ_CC          clang (configure checked -fsanitize=fuzzer)
#   LIB_SOURCES      libnsbox's sources (from Makefile.am, so they stay in step)
#   CLI_SOURCES      the CLI's argument parser
#   LIB_CFLAGS LIB_LIBS WARN_CFLAGS
#   HARNESSES        the harness names (tests/fuzz/fuzz_NAME.c)
#   MCP_SOURCES MCP_CFLAGS MCP_LIBS
#                    the whole CLI with `nsbox mcp`, for the mcp harness

O := $(builddir)/tests/fuzz/obj
vpath %.c $(builddir) $(srcdir)

SAN := -fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer
# The library's own includes name their group ("seccomp/seccomp.h" is
# ours, <seccomp.h> libseccomp's), as in Makefile.am.
CFLAGS_LIB := -std=gnu11 -g -O1 $(SAN) $(filter-out -Werror,$(WARN_CFLAGS)) -Wno-format-nonliteral \
	-I$(srcdir)/src/include -I$(srcdir)/src/lib -I$(srcdir)/src/cli -I$(builddir) -include config.h $(LIB_CFLAGS)
CFLAGS_ALL := $(CFLAGS_LIB) -I$(srcdir)/tests/fuzz

LIB_OBJS := $(patsubst %.c,$(O)/%.o,$(filter %.c,$(LIB_SOURCES)))
CLI_OBJS := $(patsubst %.c,$(O)/%.o,$(filter %.c,$(CLI_SOURCES)))
MCP_OBJS := $(patsubst %.c,$(O)/%.o,$(filter %.c,$(MCP_SOURCES)))
COMMON_OBJS := $(O)/tests/fuzz/common.o $(O)/tests/fuzz/import_direct.o

BINS := $(foreach h,$(HARNESSES),$(builddir)/tests/fuzz/fuzz-$(h))

all: $(BINS)

$(O)/src/%.o: src/%.c
	@mkdir -p $(dir $@)
	@echo "  FUZZCC   $<"
	@$(FUZZ_CC) $(CFLAGS_LIB) $(MCP_CFLAGS) -fsanitize=fuzzer-no-link -MMD -MP -c $< -o $@

$(O)/tests/%.o: tests/%.c
	@mkdir -p $(dir $@)
	@echo "  FUZZCC   $<"
	@$(FUZZ_CC) $(CFLAGS_ALL) -fsanitize=fuzzer-no-link -MMD -MP -c $< -o $@

# The seccomp harness, for the YAML format and (reading JSON only) the
# Docker/OCI one.
$(O)/tests/fuzz/fuzz_seccomp_yaml.o: tests/fuzz/fuzz_seccomp.c
	@mkdir -p $(dir $@)
	@echo "  FUZZCC   $< (yaml)"
	@$(FUZZ_CC) $(CFLAGS_ALL) -fsanitize=fuzzer-no-link -MMD -MP -c $< -o $@

$(O)/tests/fuzz/fuzz_seccomp_json.o: tests/fuzz/fuzz_seccomp.c
	@mkdir -p $(dir $@)
	@echo "  FUZZCC   $< (json)"
	@$(FUZZ_CC) $(CFLAGS_ALL) -DFUZZ_JSON -fsanitize=fuzzer-no-link -MMD -MP -c $< -o $@

# `nsbox mcp` is the CLI's: it needs all of it, and jansson.
$(builddir)/tests/fuzz/fuzz-mcp: $(O)/tests/fuzz/fuzz_mcp.o $(COMMON_OBJS) $(LIB_OBJS) $(sort $(CLI_OBJS) $(MCP_OBJS))
	@echo "  FUZZLD   $@"
	@$(FUZZ_CC) $(SAN) -fsanitize=fuzzer -o $@ $^ $(LIB_LIBS) $(MCP_LIBS) -lm

$(builddir)/tests/fuzz/fuzz-%: $(O)/tests/fuzz/fuzz_%.o $(COMMON_OBJS) $(LIB_OBJS) $(CLI_OBJS)
	@echo "  FUZZLD   $@"
	@$(FUZZ_CC) $(SAN) -fsanitize=fuzzer -o $@ $^ $(LIB_LIBS) -lm

.SECONDARY:
-include $(shell find $(O) -name '*.d' 2>/dev/null)
