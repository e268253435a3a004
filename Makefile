# mtc build: `make` builds bin/, `make test` runs every test and ends with
# "N passed, N failed", `make bench` prints benchmark figures,
# `make install PREFIX=...`, `make SAN=1 test` for the ASan+UBSan build,
# `make deb` the Debian package (docs/packaging.md).

PREFIX ?= /usr/local
SAN ?= 0
FUZZ ?= 0
FUZZ_S ?= 60
ifeq ($(FUZZ),1)
# libFuzzer build: clang, every object instrumented for coverage + ASan/UBSan.
B := build-fuzz
CC := clang
SANFLAGS := -fsanitize=address,undefined,fuzzer-no-link -fno-omit-frame-pointer
else ifeq ($(SAN),1)
B := build-san
SANFLAGS := -fsanitize=address,undefined -fno-omit-frame-pointer
# -O1, as ASan's authors advise: half the compile time of -O2 (the build runs
# beside every `make test`). At -O1 GCC's weaker range analysis warns of
# format truncation where -O2 proves there is none; the -O2 build keeps that
# warning as an error.
OPT ?= -O1
# line tables only: ASan's and UBSan's reports keep file:line, and the build
# takes 13% less CPU than with -g
DEBUG ?= -g1
SAN_CWARN := -Wno-format-truncation
else
B := build
SANFLAGS :=
endif
BIN := $(B)/bin

CC ?= cc
OPT ?= -O2
DEBUG ?= -g
# clang (make fuzz) does not know some GCC warning names used in pragmas, and under the
# sanitizers it cannot vectorize the kernels' `omp simd` loops (a warning, not a bug).
CC_WARN := $(if $(findstring clang,$(CC)),-Wno-unknown-warning-option -Wno-pass-failed,)
# EXTRA_CFLAGS / EXTRA_LDFLAGS come last: a distribution's flags (the package
# passes dpkg-buildflags' hardening: -D_FORTIFY_SOURCE, -fstack-protector-strong,
# -z relro -z now). The environment's CFLAGS are not used: ours must stay.
CFLAGS := -std=c11 -D_GNU_SOURCE $(OPT) $(DEBUG) -Wall -Wextra -Werror $(CC_WARN) $(SAN_CWARN) -Isrc $(SANFLAGS) -MMD -MP $(EXTRA_CFLAGS)
LDFLAGS := $(SANFLAGS) $(EXTRA_LDFLAGS)

# Control plane: every module folder except train is one library.
CP_MODULES := common nvidia schema store backup dataset registry endpoint jobs api control cluster slurm provider health experiment recipes image spank scan
# src/spank/plugin.c holds Slurm's SPANK entry points: only in the plugin
CP_SRCS := $(filter-out src/spank/plugin.c,$(foreach m,$(CP_MODULES),$(wildcard src/$(m)/*.c)))
CP_OBJS := $(CP_SRCS:%.c=$(B)/%.o)
CP_LIBS := -lmicrohttpd -ljansson -lsqlite3 -ltre -lcurl -lcrypto -lpthread -lm

# Trainer: OpenMP + OpenBLAS + MPI (flags from the MPI compiler wrapper).
MPI_CFLAGS := $(shell mpicc --showme:compile 2>/dev/null)
MPI_LIBS := $(shell mpicc --showme:link 2>/dev/null)
# -fno-trapping-math and the dynamic vector cost model let GCC vectorize the kernels'
# `omp simd` loops at -O2 (exp, softmax, SwiGLU, attention: 1.5-3x faster).
VECT_COST := $(if $(findstring clang,$(CC)),,-fvect-cost-model=dynamic)
TRAIN_CFLAGS := -fopenmp -fno-trapping-math $(VECT_COST) -I/usr/include/x86_64-linux-gnu/openblas-pthread $(MPI_CFLAGS)
TRAIN_SRCS := $(wildcard src/train/*.c src/train/cpu/*.c)
TRAIN_OBJS := $(TRAIN_SRCS:%.c=$(B)/%.o)
TRAIN_LIBS := -fopenmp -lopenblas -ljansson $(MPI_LIBS) -lcrypto -lpthread -lm

# The trainer shares the policy-free modules: common, the schema engine and the
# registry's files (registry_resolve, for mtc-serve).
COMMON_OBJS := $(filter $(B)/src/common/% $(B)/src/schema/% $(B)/src/registry/%,$(CP_OBJS))

# mtc-serve: the HTTP front (src/serve) over the trainer library's generation engine.
SERVE_OBJS := $(patsubst %.c,$(B)/%.o,$(wildcard src/serve/*.c))
SERVE_LIBS := -lmicrohttpd $(TRAIN_LIBS)

PROGS := $(patsubst src/cmd/%.c,%,$(wildcard src/cmd/*.c))
UNIT_SRCS := $(wildcard tests/unit/test_*.c)
UNIT_BINS := $(UNIT_SRCS:tests/unit/%.c=$(B)/tests/%)
FAKE_SRCS := $(wildcard tests/fakes/*.c)
FAKE_LIBS := $(FAKE_SRCS:tests/fakes/%.c=$(B)/fakes/lib%.so)
# Test tools: programs integration tests drive (not run by tests/run.sh).
TOOL_SRCS := $(wildcard tests/tools/*.c)
TOOL_BINS := $(TOOL_SRCS:tests/tools/%.c=$(B)/tests/tools/%)


# The container plugin Slurm loads (srun, sbatch, slurmstepd): position-
# independent objects of src/spank and the common helpers it uses.
SPANK_SO := $(B)/lib/mtc/spank_mtc.so
SPANK_OBJS := $(patsubst %.c,$(B)/pic/%.o,$(wildcard src/spank/*.c) src/nvidia/nvidia.c src/nvidia/mellanox.c src/common/err.c src/common/file.c \
	src/common/fsafe.c src/common/user.c src/common/misc.c)

.SECONDEXPANSION:
.PHONY: all progs unit-bins test unit bench install deb clean format fuzz fuzz-build
all: progs $(UNIT_BINS) $(FAKE_LIBS) $(TOOL_BINS)
# the unit tests and the fakes they load (the sanitizer build: the programs
# its tests start are $(B)'s)
unit-bins: $(UNIT_BINS) $(FAKE_LIBS)

# what `make install` (and so the package) ships: the programs and the plugin
progs: $(addprefix $(BIN)/,$(PROGS)) $(SPANK_SO) $(BIN)/enroot

# `enroot` is mtc under that name (import, version, list: docs/containers.md)
$(BIN)/enroot: | $(BIN)/mtc
	ln -sf mtc $@

$(B)/pic/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -fPIC -fvisibility=$(PIC_VIS) -c $< -o $@

# only the plugin's entry points are exported
PIC_VIS := hidden
$(B)/pic/src/spank/plugin.o: PIC_VIS := default

$(SPANK_SO): $(SPANK_OBJS)
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -shared -fPIC -o $@.tmp $^ -lcrypto
	@# slurmd resolves nothing of ours: a helper of src/common the plugin
	@# calls but does not link loads lazily here and fails to load (or
	@# crashes slurmstepd at its first call) where the package binds at once
	@u=$$(nm -D --undefined-only $@.tmp | awk '$$2 ~ /^mtc_/ {print $$2}'); \
	if [ -n "$$u" ]; then echo "$@: calls what it does not link: $$u" >&2; rm -f $@.tmp; exit 1; fi
	mv $@.tmp $@

# One version for every program, /healthz and the package: the VERSION file.
VERSION := $(shell cat VERSION)
$(B)/src/common/version.o: CFLAGS += -DMTC_VERSION='"$(VERSION)"'
$(B)/src/common/version.o: VERSION

$(B)/src/train/%.o: src/train/%.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(TRAIN_CFLAGS) -c $< -o $@

$(B)/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -c $< -o $@

$(B)/libmtc.a: $(CP_OBJS)
	@mkdir -p $(dir $@)
	rm -f $@ && ar rcs $@ $^

$(B)/libmtctrain.a: $(TRAIN_OBJS) $(COMMON_OBJS)
	@mkdir -p $(dir $@)
	rm -f $@ && ar rcs $@ $^

# A program is src/cmd/NAME.c plus the files in src/cmd/NAME/ when present.
cmd_objs = $(patsubst %.c,$(B)/%.o,src/cmd/$(1).c $(wildcard src/cmd/$(1)/*.c))

$(B)/src/cmd/mtc-train.o $(B)/src/cmd/mtc-train/%.o: CFLAGS += $(TRAIN_CFLAGS)

$(BIN)/mtc-train: $(call cmd_objs,mtc-train) $(B)/libmtctrain.a
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -o $@ $(filter %.o %.a,$^) $(TRAIN_LIBS)

$(BIN)/mtc-serve: $(call cmd_objs,mtc-serve) $(SERVE_OBJS) $(B)/libmtctrain.a
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -o $@ $(filter %.o %.a,$^) $(SERVE_LIBS)

# mtc-scan: the health scanner's MPI workload; judges with health/judge.c (no control plane).
$(B)/src/cmd/mtc-scan.o $(B)/src/cmd/mtc-scan/%.o: CFLAGS += $(MPI_CFLAGS)

$(BIN)/mtc-scan: $(call cmd_objs,mtc-scan) $(B)/libmtc.a
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -o $@ $(filter %.o %.a,$^) $(CP_LIBS) $(MPI_LIBS)

$(addprefix $(BIN)/,$(filter-out mtc-train mtc-serve mtc-scan,$(PROGS))): $(BIN)/%: $$(call cmd_objs,%) $(B)/libmtc.a
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -o $@ $(filter %.o %.a,$^) $(CP_LIBS)

# Unit tests: test_train_* link the trainer, the rest the control plane.
$(B)/tests/test_train_%: tests/unit/test_train_%.c $(B)/libmtctrain.a
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(TRAIN_CFLAGS) -Itests/unit $(LDFLAGS) -o $@ $(filter %.c %.a,$^) $(TRAIN_LIBS)

$(B)/tests/test_%: tests/unit/test_%.c $(B)/libmtc.a
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -Itests/unit $(LDFLAGS) -o $@ $(filter %.c %.a,$^) $(CP_LIBS)

# gpu_probe runs inside test containers: libc alone
$(B)/tests/tools/gpu_probe: tests/tools/gpu_probe.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(LDFLAGS) -o $@ $<

$(B)/tests/tools/%: tests/tools/%.c $(B)/libmtc.a
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(LDFLAGS) -o $@ $(filter %.c %.a,$^) $(CP_LIBS)

# the fakes of the driver's libraries carry the real ones' sonames, so that
# ldconfig links a versioned copy (a driver tree, tests/integration) to them
$(B)/fakes/libnvml.so: FAKE_SONAME := -Wl,-soname,libnvidia-ml.so.1
$(B)/fakes/libcuda.so: FAKE_SONAME := -Wl,-soname,libcuda.so.1
$(B)/fakes/lib%.so: tests/fakes/%.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -fPIC -shared $(FAKE_SONAME) -o $@ $< -lpthread

# `make test` also builds the ASan+UBSan variant of the unit tests and runs
# them (the programs they start are the normal build's: MTC_BUILD); the
# runner builds it beside the first programs (SAN_BUILD, output in build-san.log).
test: all
ifeq ($(SAN),0)
	@B=$(B) SAN_B=build-san SAN_BUILD='$(MAKE) --no-print-directory -j$$(nproc) SAN=1 unit-bins' tests/run.sh $(TESTS)
else
	@B=$(B) tests/run.sh $(TESTS)
endif

# Fuzzing (clang + libFuzzer): fuzz/NAME.c is one harness; NAME train_* links
# the trainer, the rest the control plane. `make fuzz FUZZ_S=N` builds them in
# build-fuzz/ and runs each N seconds from fuzz/corpus/NAME (see fuzz/README.md).
FUZZ_SRCS := $(wildcard fuzz/*.c)
FUZZ_BINS := $(FUZZ_SRCS:fuzz/%.c=$(B)/fuzz/%)

$(B)/fuzz/train_%: fuzz/train_%.c $(B)/libmtctrain.a
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(TRAIN_CFLAGS) -fsanitize=fuzzer -o $@ $(filter %.c %.a,$^) $(TRAIN_LIBS)

$(B)/fuzz/%: fuzz/%.c $(B)/libmtc.a
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -fsanitize=fuzzer -o $@ $(filter %.c %.a,$^) $(CP_LIBS)

fuzz-build: $(FUZZ_BINS)

fuzz:
	@$(MAKE) --no-print-directory FUZZ=1 fuzz-build
	@FUZZ_S=$(FUZZ_S) fuzz/run.sh $(FUZZERS)

unit: all
	@B=$(B) tests/run.sh unit

bench: all
	@B=$(B) bench/run.sh

# Man pages (plain roff, man/); installed uncompressed: man-db reads them as
# they are and a Debian build's dh_compress gzips them (-9n) itself.
MAN_PAGES := $(wildcard man/*.[1-8])

# mtcd finds mtc-agent, mtc-train and mtc-serve beside itself, the plugin in
# ../lib/mtc and data/ (machine types, www/ console) and recipes/ in ../share/mtc;
# the package takes whatever this target installs.
install: progs
	install -d $(DESTDIR)$(PREFIX)/bin $(DESTDIR)$(PREFIX)/share/mtc
	install -m 0755 $(addprefix $(BIN)/,$(PROGS)) $(DESTDIR)$(PREFIX)/bin/
	install -d $(DESTDIR)$(PREFIX)/lib/mtc
	install -m 0644 $(SPANK_SO) $(DESTDIR)$(PREFIX)/lib/mtc/
	# enroot's import through mtc, only where no real enroot is installed (a
	# direct install: a package built with DESTDIR cannot know the target's)
	if [ -z "$(DESTDIR)" ] && ! command -v enroot >/dev/null 2>&1 && [ ! -e $(PREFIX)/bin/enroot ]; then \
		ln -s mtc $(DESTDIR)$(PREFIX)/bin/enroot; fi
	cp -r data/. $(DESTDIR)$(PREFIX)/share/mtc/
	cp -r recipes examples $(DESTDIR)$(PREFIX)/share/mtc/
	install -d $(DESTDIR)$(PREFIX)/share/man/man1 $(DESTDIR)$(PREFIX)/share/man/man8
	install -m 0644 $(filter %.1,$(MAN_PAGES)) $(DESTDIR)$(PREFIX)/share/man/man1/
	install -m 0644 $(filter %.8,$(MAN_PAGES)) $(DESTDIR)$(PREFIX)/share/man/man8/

# The Debian package (docs/packaging.md): dpkg-buildpackage in a copy of the
# working tree (tracked and untracked files git does not ignore) under
# build-deb/, so build/ is untouched; the .deb files are left in build-deb/.
# debian/changelog's version must be VERSION's: the entry is written by hand.
DEB_JOBS ?= 2
DEB_DIR := build-deb/mtc-$(VERSION)
deb:
	@v=$$(dpkg-parsechangelog -S Version) && [ "$$v" = "$(VERSION)" ] || \
	  { echo "make deb: debian/changelog is at $$v, VERSION is $(VERSION): add a changelog entry (dch -v $(VERSION))" >&2; exit 1; }
	rm -rf build-deb && mkdir -p $(DEB_DIR)
	git ls-files -z --cached --others --exclude-standard | \
	  tar -c --null --no-recursion --ignore-failed-read -T - -f - | tar -x -C $(DEB_DIR)
	cd $(DEB_DIR) && DEB_BUILD_OPTIONS="nocheck parallel=$(DEB_JOBS) $(DEB_BUILD_OPTIONS)" \
	  dpkg-buildpackage -us -uc -b >../build.log 2>&1 || { tail -30 ../build.log; exit 1; }
	@ls -1 $(CURDIR)/build-deb/*.deb

format:
	clang-format -i $$(git ls-files '*.c' '*.h')

clean:
	rm -rf build build-san build-fuzz build-deb

-include $(shell find $(B) -name '*.d' 2>/dev/null)
