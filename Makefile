# tgc — one build command: `make` builds the static and shared library, the pkg-config file, the tests,
# the examples, the tg-llm command and the benchmark. `make test` runs the suite; `make install PREFIX=...
# [DESTDIR=...]` installs the library, tg.h, tg.pc and tg-llm.
CC      ?= cc
PREFIX  ?= /usr/local
LIBDIR  ?= $(PREFIX)/lib
INCLUDEDIR ?= $(PREFIX)/include
BINDIR  ?= $(PREFIX)/bin
BUILD   ?= build
SAN     ?=
OBJCOPY ?= objcopy
OPT     ?= -O2 -g
CFLAGS  := -std=c11 -D_GNU_SOURCE $(OPT) -Wall -Wextra -Werror -Wno-unused-parameter -fPIC -Itests \
           -Iinclude -Isrc -pthread $(SAN) $(EXTRA_CFLAGS)
LDLIBS  := -lz -ldl -lm -pthread $(SAN)

# The version lives in include/tg.h only (TG_VERSION_MAJOR/MINOR/PATCH); the SONAME carries the major.
tg_version_part = $(shell sed -n 's/^.define TG_VERSION_$(1)  *\([0-9][0-9]*\) *$$/\1/p' include/tg.h)
VERSION_MAJOR := $(call tg_version_part,MAJOR)
VERSION_MINOR := $(call tg_version_part,MINOR)
VERSION_PATCH := $(call tg_version_part,PATCH)
ifeq ($(and $(VERSION_MAJOR),$(VERSION_MINOR),$(VERSION_PATCH)),)
$(error cannot read TG_VERSION_MAJOR/MINOR/PATCH from include/tg.h)
endif
VERSION := $(VERSION_MAJOR).$(VERSION_MINOR).$(VERSION_PATCH)
SONAME  := libtg.so.$(VERSION_MAJOR)

# MPI (src/dist/mpi.c, linked against libmpi) when mpicc or pkg-config ompi-c names its flags; without it
# src/dist/nompi.c gives the same tg_dist_* functions, which fail with a message (install libopenmpi-dev).
# MPI=0 builds without it even when it is installed.
MPI ?= auto
ifneq ($(MPI),0)
MPI_CFLAGS := $(shell mpicc --showme:compile 2>/dev/null || pkg-config --cflags ompi-c 2>/dev/null)
MPI_LIBS   := $(shell mpicc --showme:link 2>/dev/null || pkg-config --libs ompi-c 2>/dev/null)
endif
ifeq ($(strip $(MPI_LIBS)),)
DIST_SKIP := src/dist/mpi.c
MPI_LIBS  :=
else
DIST_SKIP := src/dist/nompi.c
endif

LIB_SRC   := $(filter-out $(DIST_SKIP),$(wildcard src/*/*.c))
LIB_OBJ   := $(LIB_SRC:%.c=$(BUILD)/%.o)
LDLIBS    += $(MPI_LIBS)
$(BUILD)/src/dist/mpi.o: CFLAGS += $(MPI_CFLAGS)
TEST_SRC  := $(wildcard tests/*.c)
TEST_OBJ  := $(TEST_SRC:%.c=$(BUILD)/%.o)
EXAMPLES  := $(patsubst examples/%.c,$(BUILD)/examples/%,$(wildcard examples/*.c))
BENCHES   := $(patsubst bench/%.c,$(BUILD)/bench/%,$(wildcard bench/*.c))
MPI_TESTS := $(patsubst tests/mpi/%.c,$(BUILD)/tests/mpi/%,$(wildcard tests/mpi/*.c))

all: $(BUILD)/libtg.a $(BUILD)/libtg.so $(BUILD)/tg.pc $(BUILD)/run_tests $(BUILD)/onnx_backend $(EXAMPLES) $(BENCHES) \
     $(MPI_TESTS) $(BUILD)/tg-llm

# The code generator's identity for the disk cache of rendered kernels (src/engine/render_cache.c): a checksum
# of the library's sources, so a library built from other sources never reads an older one's kernels.
CODEGEN_ID := $(shell cat $(sort $(LIB_SRC) $(wildcard src/*/*.h include/*.h)) | cksum | cut -d' ' -f1)
$(BUILD)/src/engine/render_cache.o: CFLAGS += -DTG_CODEGEN_ID=$(CODEGEN_ID)ULL
$(BUILD)/src/engine/render_cache.o: $(LIB_SRC)

# Library objects hide every name; include/tg.h gives its declarations default visibility.
$(LIB_OBJ): VISIBILITY := -fvisibility=hidden

$(BUILD)/%.o: %.c $(wildcard include/*.h src/*/*.h tests/*.h) Makefile
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(VISIBILITY) -c $< -o $@

# libtg.a: all objects linked into one relocatable object whose hidden (internal) names are then made local,
# so a program that defines its own buffer_new or tmp links against it.
$(BUILD)/libtg.o: $(LIB_OBJ)
	$(LD) -r -o $@ $^
	$(OBJCOPY) --localize-hidden $@

$(BUILD)/libtg.a: $(BUILD)/libtg.o
	@rm -f $@
	ar rcs $@ $^

# The tests and benches call internals (uop_new, schedule_create, ...): they link this archive of the
# objects as compiled. It is never installed.
$(BUILD)/libtg_internal.a: $(LIB_OBJ)
	@rm -f $@
	ar rcs $@ $^

# libtg.so.MAJOR.MINOR.PATCH, SONAME libtg.so.MAJOR, exporting tg_* only (src/libtg.map)
$(BUILD)/libtg.so.$(VERSION): $(LIB_OBJ) src/libtg.map
	$(CC) -shared -Wl,-soname,$(SONAME) -Wl,--version-script=src/libtg.map -o $@ $(LIB_OBJ) $(LDLIBS)

$(BUILD)/$(SONAME): $(BUILD)/libtg.so.$(VERSION)
	ln -sf $(notdir $<) $@

$(BUILD)/libtg.so: $(BUILD)/$(SONAME)
	ln -sf $(notdir $<) $@

# tg.pc is remade when PREFIX, LIBDIR or INCLUDEDIR differ from the last build's (so `make install
# PREFIX=P` installs one that says P) or when the version changes.
$(BUILD)/install-dirs: FORCE
	@mkdir -p $(BUILD)
	@printf '%s\n' '$(PREFIX)' '$(LIBDIR)' '$(INCLUDEDIR)' | cmp -s - $@ || \
	  printf '%s\n' '$(PREFIX)' '$(LIBDIR)' '$(INCLUDEDIR)' > $@

pc_path = $(patsubst $(PREFIX)/%,$${prefix}/%,$(1))
$(BUILD)/tg.pc: $(BUILD)/install-dirs include/tg.h Makefile
	printf '%s\n' 'prefix=$(PREFIX)' 'libdir=$(call pc_path,$(LIBDIR))' \
	  'includedir=$(call pc_path,$(INCLUDEDIR))' '' 'Name: tg' \
	  'Description: tgc, lazy tensors compiled to fused kernels' 'Version: $(VERSION)' \
	  'Libs: -L$${libdir} -ltg' 'Libs.private: -lz -ldl -lm -pthread $(MPI_LIBS)' 'Cflags: -I$${includedir}' > $@

$(BUILD)/run_tests: $(TEST_OBJ) $(BUILD)/libtg_internal.a
	$(CC) -o $@ $(TEST_OBJ) $(BUILD)/libtg_internal.a $(LDLIBS)

# the random-API driver (tests/fuzz/api_driver.c): not part of run_tests; scripts/fuzz_api.sh builds it with sanitizers
$(BUILD)/fuzz/api_driver: tests/fuzz/api_driver.c tests/ref.c tests/ref.h tests/test.h $(BUILD)/libtg_internal.a include/tg.h
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -o $@ tests/fuzz/api_driver.c tests/ref.c $(BUILD)/libtg_internal.a $(LDLIBS)

# ONNX's backend tests through the C API (tests/onnx_backend/onnx_backend.c): not part of run_tests
$(BUILD)/onnx_backend: tests/onnx_backend/onnx_backend.c $(BUILD)/libtg_internal.a include/tg.h $(wildcard src/onnx/*.h)
	$(CC) $(CFLAGS) -o $@ tests/onnx_backend/onnx_backend.c $(BUILD)/libtg_internal.a $(LDLIBS)

$(BUILD)/examples/%: examples/%.c $(wildcard examples/*.h) $(BUILD)/libtg.a include/tg.h
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -o $@ $< $(BUILD)/libtg.a $(LDLIBS)

# tg-llm, the command a user runs (installed): the public API only, as the examples
$(BUILD)/tg-llm: tools/tg_llm.c examples/args.h $(BUILD)/libtg.a include/tg.h
	$(CC) $(CFLAGS) -Iexamples -o $@ $< $(BUILD)/libtg.a $(LDLIBS)

# the programs tests/mpi.sh runs under mpirun (public API only)
$(BUILD)/tests/mpi/%: tests/mpi/%.c $(wildcard examples/*.h) $(BUILD)/libtg.a include/tg.h
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -Iexamples -o $@ $< $(BUILD)/libtg.a $(LDLIBS)

# bench/allreduce.c times Open MPI's own MPI_Allreduce next to tg_dist_all_reduce: it needs mpi.h
$(BUILD)/bench/allreduce: CFLAGS += $(MPI_CFLAGS) $(if $(strip $(MPI_LIBS)),-DTG_BENCH_MPI)

$(BUILD)/bench/%: bench/%.c $(wildcard bench/*.h examples/*.h) $(BUILD)/libtg_internal.a include/tg.h
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -o $@ $< $(BUILD)/libtg_internal.a $(LDLIBS)

test: $(BUILD)/run_tests
	./$(BUILD)/run_tests

install: $(BUILD)/libtg.a $(BUILD)/libtg.so $(BUILD)/tg.pc $(BUILD)/tg-llm
	install -d $(DESTDIR)$(LIBDIR)/pkgconfig $(DESTDIR)$(INCLUDEDIR) $(DESTDIR)$(BINDIR)
	install -m 755 $(BUILD)/tg-llm $(DESTDIR)$(BINDIR)/
	install -m 644 include/tg.h $(DESTDIR)$(INCLUDEDIR)/
	install -m 644 $(BUILD)/libtg.a $(DESTDIR)$(LIBDIR)/
	install -m 755 $(BUILD)/libtg.so.$(VERSION) $(DESTDIR)$(LIBDIR)/
	ln -sf libtg.so.$(VERSION) $(DESTDIR)$(LIBDIR)/$(SONAME)
	ln -sf $(SONAME) $(DESTDIR)$(LIBDIR)/libtg.so
	install -m 644 $(BUILD)/tg.pc $(DESTDIR)$(LIBDIR)/pkgconfig/

uninstall:
	rm -f $(DESTDIR)$(BINDIR)/tg-llm $(DESTDIR)$(INCLUDEDIR)/tg.h $(DESTDIR)$(LIBDIR)/libtg.a $(DESTDIR)$(LIBDIR)/libtg.so.$(VERSION) \
	  $(DESTDIR)$(LIBDIR)/$(SONAME) $(DESTDIR)$(LIBDIR)/libtg.so $(DESTDIR)$(LIBDIR)/pkgconfig/tg.pc

clean:
	rm -rf $(BUILD)

.PHONY: all test install uninstall clean FORCE
.DELETE_ON_ERROR:
