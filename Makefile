# tgc — one build command: `make` builds the static and shared library, the pkg-config file, the tests,
# the examples and the benchmark. `make test` runs the suite; `make install PREFIX=...` installs.
CC      ?= cc
PREFIX  ?= /usr/local
BUILD   ?= build
SAN     ?=
OPT     ?= -O2 -g
CFLAGS  := -std=c11 -D_GNU_SOURCE $(OPT) -Wall -Wextra -Werror -Wno-unused-parameter -fPIC -Itests \
           -Iinclude -Isrc -pthread $(SAN) $(EXTRA_CFLAGS)
LDLIBS  := -lz -ldl -lm -pthread $(SAN)

LIB_SRC   := $(wildcard src/*/*.c)
LIB_OBJ   := $(LIB_SRC:%.c=$(BUILD)/%.o)
TEST_SRC  := $(wildcard tests/*.c)
TEST_OBJ  := $(TEST_SRC:%.c=$(BUILD)/%.o)
EXAMPLES  := $(patsubst examples/%.c,$(BUILD)/examples/%,$(wildcard examples/*.c))
BENCHES   := $(patsubst bench/%.c,$(BUILD)/bench/%,$(wildcard bench/*.c))

all: $(BUILD)/libtg.a $(BUILD)/libtg.so $(BUILD)/tg.pc $(BUILD)/run_tests $(EXAMPLES) $(BENCHES)

$(BUILD)/%.o: %.c $(wildcard include/*.h src/*/*.h tests/*.h) Makefile
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -c $< -o $@

$(BUILD)/libtg.a: $(LIB_OBJ)
	@rm -f $@
	ar rcs $@ $^

$(BUILD)/libtg.so: $(LIB_OBJ)
	$(CC) -shared -o $@ $^ $(LDLIBS)

$(BUILD)/tg.pc: Makefile
	@mkdir -p $(BUILD)
	printf 'prefix=%s\nlibdir=$${prefix}/lib\nincludedir=$${prefix}/include\n\nName: tg\nDescription: tgc, lazy tensors compiled to fused kernels\nVersion: 0.1.0\nLibs: -L$${libdir} -ltg\nLibs.private: -lz -ldl -lm -pthread\nCflags: -I$${includedir}\n' '$(PREFIX)' > $@

$(BUILD)/run_tests: $(TEST_OBJ) $(BUILD)/libtg.a
	$(CC) -o $@ $(TEST_OBJ) $(BUILD)/libtg.a $(LDLIBS)

# the random-API driver (tests/fuzz/api_driver.c): not part of run_tests; scripts/fuzz_api.sh builds it with sanitizers
$(BUILD)/fuzz/api_driver: tests/fuzz/api_driver.c tests/ref.c tests/ref.h tests/test.h $(BUILD)/libtg.a include/tg.h
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -o $@ tests/fuzz/api_driver.c tests/ref.c $(BUILD)/libtg.a $(LDLIBS)

$(BUILD)/examples/%: examples/%.c $(BUILD)/libtg.a include/tg.h
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -o $@ $< $(BUILD)/libtg.a $(LDLIBS)

$(BUILD)/bench/%: bench/%.c $(wildcard bench/*.h) $(BUILD)/libtg.a include/tg.h
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -o $@ $< $(BUILD)/libtg.a $(LDLIBS)

test: $(BUILD)/run_tests
	./$(BUILD)/run_tests

install: $(BUILD)/libtg.a $(BUILD)/libtg.so $(BUILD)/tg.pc
	install -d $(DESTDIR)$(PREFIX)/lib/pkgconfig $(DESTDIR)$(PREFIX)/include
	install -m 644 include/tg.h $(DESTDIR)$(PREFIX)/include/
	install -m 644 $(BUILD)/libtg.a $(DESTDIR)$(PREFIX)/lib/
	install -m 755 $(BUILD)/libtg.so $(DESTDIR)$(PREFIX)/lib/
	install -m 644 $(BUILD)/tg.pc $(DESTDIR)$(PREFIX)/lib/pkgconfig/

clean:
	rm -rf $(BUILD)

.PHONY: all test install clean
