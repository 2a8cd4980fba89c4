# SecureStore. On a fresh Debian machine `make demo` and `make test` each do all the set-up they need.
PREFIX ?= /usr/local
SWIFT ?= swift
HARNESS := Tests/Harness/with-keyring
# Debian packages: the two libraries we link, the keyring and bus the tests talk to, and the reference
# tools (secret-tool, sqlcipher, sqlite3, git) the interoperability tests and the demo run. libssl-dev: the
# headers of libcrypto, which SQLCipher links already; attachments take their SHA-256 digests from it.
# curl, xz-utils, make, gcc, zlib1g-dev: git's own credential-helper test (t0303) comes from Debian's source of the
# installed git, whose test tool is built once (Tests/Harness/git-credential-suite).
# keyutils (keyctl) and iproute2: the no-D-Bus pass of the suite (Tests/Harness/with-keyfile) gives the run a session
# keyring of its own and brings up loopback in its private network namespace.
APT_PACKAGES := libsqlcipher-dev libssl-dev libsecret-1-dev gnome-keyring libsecret-tools sqlcipher dbus \
                libglib2.0-bin sqlite3 libsqlite3-dev git pkg-config python3 man-db keyutils iproute2 \
                curl xz-utils make gcc zlib1g-dev
# Host packages `make test-debian13` needs on top (the packages inside its Debian 13 root are
# APT_PACKAGES plus the toolchain's, listed in Tests/Harness/debian13).
HOST_PACKAGES_DEBIAN13 := debootstrap
# The second Secret Service the tests run against: KeePassXC, headless under Xvfb, its dialogs answered
# by xdotool (Tests/Harness/with-keepassxc). `make deps` installs them when it can; `make test` skips that
# part, saying so, when one is missing.
APT_OPTIONAL := keepassxc xvfb xdotool
# The shells whose completion scripts the suite checks (zsh -n, fish -n; skipped, saying so, when absent).
APT_OPTIONAL += zsh fish
# systemd-creds, to make the credentials the systemd key store reads (KeyFileStoreTests; skipped, saying so, without it).
APT_OPTIONAL += systemd
# libseccomp for Python: Tests/Harness/without-keyctl refuses the kernel keyring as a container does (KeyFileStoreTests;
# skipped, saying so, without it).
APT_OPTIONAL += python3-seccomp
# python keyring, whose view of our tokens Docs/keychain.md states (DocsTruthTests; skipped, saying so, when absent).
APT_OPTIONAL += python3-keyring
# The tools people import from: taskwarrior and todo.txt's CLI write the files `tasks import --from` reads, pass and
# gnupg keep the store `token import --from pass` decrypts (TaskImportTests, TokenImportTests; skipped, saying so,
# without them).
APT_OPTIONAL += taskwarrior todotxt-cli pass gnupg
# Syncthing, the replication engine `securestore sync --folder` is tested through: two instances on 127.0.0.1 only
# (SyncSyncthingTests; skipped, saying so, without it).
APT_OPTIONAL += syncthing
# The suites that run a second time with no D-Bus at all, on the encrypted key file (issue 24): the CLI (every suite of
# the built tool), the keyed database and the git credential helper. Tests that inspect the Secret Service itself
# (secret-tool's view, keyring-ctl, python keyring) are skipped there, saying so.
KEYFILE_HARNESS := Tests/Harness/with-keyfile
KEYFILE_SUITES := CLITests|KeyedDatabase|GitCredential
KEEPASSXC_HARNESS := Tests/Harness/with-keepassxc
KEEPASSXC_SUITES := KeychainTests|KeePassXCApprovalTests|KeePassXCCommandTests|KeyedDatabase|GitCredential
KEEPASSXC_CONFIRM_OFF_SUITES := KeychainTests|KeePassXCCommandTests|KeyRotationApprovalTests
# The second pass turns KeePassXC's access and delete confirmations off, and its "unlock before search" (on in the
# stock pass: a search of a locked database waits for an unlock; off: it answers with nothing).
KEEPASSXC_OFF := SECURESTORE_KEEPASSXC_CONFIRM=off SECURESTORE_KEEPASSXC_UNLOCK_BEFORE_SEARCH=off
# A KeePassXC pass that fails is run once more, saying so (the harness keeps the failed run's logs): KeePassXC
# 2.7.4 under Xvfb was seen to stop answering mid-pass once in ~10 runs (a prompt never completed, then no
# provider on the bus), never twice in a row. A real failure fails both runs.
KEEPASSXC_RETRY := echo "test: the KeePassXC pass failed; running it once more (logs of the failed run kept, see above)" >&2

.PHONY: all deps deps-debian13 build build-tests test test-debian13 demo install uninstall clean fuzz soak bench bench-attachments bench-keystores bench-sync bench-watch-idle

all: build

# Installs whichever of the packages in $(1) are missing (sudo unless root); a no-op when all are there.
define install-missing
@missing=""; for p in $(1); do \
    dpkg-query -W -f='$${Status}' $$p 2>/dev/null | grep -q 'install ok installed' || missing="$$missing $$p"; \
done; \
if [ -n "$$missing" ]; then \
    if [ "$$(id -u)" = 0 ]; then sudo=""; else sudo="sudo"; fi; \
    echo "deps: installing$$missing"; \
    $$sudo apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$sudo apt-get install -y -qq $$missing; \
fi
endef

deps:
	$(call install-missing,$(APT_PACKAGES))
	@missing=""; for p in $(APT_OPTIONAL); do \
	    dpkg-query -W -f='$${Status}' $$p 2>/dev/null | grep -q 'install ok installed' || missing="$$missing $$p"; \
	done; \
	if [ -n "$$missing" ]; then \
	    if [ "$$(id -u)" = 0 ]; then sudo=""; else sudo="sudo"; fi; \
	    echo "deps: installing$$missing (for the KeePassXC and completion tests)"; \
	    { $$sudo apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$sudo apt-get install -y -qq $$missing; } || \
	        echo "deps: could not install$$missing; make test will skip the parts that need them"; \
	fi

build: deps
	$(SWIFT) build

# The stress helper (Tests/Stress) and the benchmarks (Tests/Benchmarks) are packages of their own; the suite
# runs the stress helper, and its smoke test the benchmarks' debug build.
BENCHMARKS := --package-path Tests/Benchmarks
STRESS := --package-path Tests/Stress
STRESS_BIN := Tests/Stress/.build/debug/securestore-stress
# SwiftPM reuses a dependent package's build plan when only the product's source files changed, so a file added
# to the product is missing there ("cannot find … in scope"): drop the plans (not the objects) before building.
FRESH_PLANS := rm -f Tests/Stress/.build/*.yaml Tests/Benchmarks/.build/*.yaml Tests/Benchmarks/.build-static/*.yaml
build-tests: deps
	$(SWIFT) build --build-tests
	$(FRESH_PLANS)
	$(SWIFT) build $(STRESS)
	$(SWIFT) build $(BENCHMARKS)

# The whole suite runs inside a private bus with a throw-away gnome-keyring (never the user's).
# Serial: some tests lock, stop and restart that keyring, which would disturb tests running beside them.
# Then the Keychain, keyed-database and git-credential suites again against KeePassXC with stock settings;
# SECURESTORE_PROMPT=always lets the processes the tests start answer KeePassXC's approval prompts.
test: build-tests
	Tests/DocExamples/check-doc-examples
	@# SecureStoreCore is the one system layer: no C library file call elsewhere in Sources (Docs/architecture.md).
	Tests/check-libc-calls
	@# Every ``symbol`` link of the modules' documentation comments resolves (the toolchain's docc; issue 23).
	Tests/check-doc-links
	$(HARNESS) $(SWIFT) test --skip-build --no-parallel --disable-xctest
	@echo "test: git's own credential-helper test (t0303) on the Secret Service"
	$(HARNESS) Tests/Harness/git-credential-suite .build/debug/securestore
	@echo "test: again with no D-Bus at all, on the key file ($(KEYFILE_SUITES), then git's t0303)"
	SECURESTORE_TOOL="$$(pwd)/.build/debug/securestore" $(KEYFILE_HARNESS) $(SWIFT) test --skip-build --no-parallel \
	    --disable-xctest --filter '$(KEYFILE_SUITES)'
	SECURESTORE_TOOL="$$(pwd)/.build/debug/securestore" $(KEYFILE_HARNESS) Tests/Harness/git-credential-suite \
	    .build/debug/securestore
	@if command -v keepassxc >/dev/null && command -v Xvfb >/dev/null && command -v xdotool >/dev/null; then \
	    echo "test: again against KeePassXC ($(KEEPASSXC_SUITES))"; \
	    SECURESTORE_PROMPT=always $(KEEPASSXC_HARNESS) $(SWIFT) test --skip-build --no-parallel --disable-xctest \
	        --filter '$(KEEPASSXC_SUITES)' || { $(KEEPASSXC_RETRY); \
	    SECURESTORE_PROMPT=always $(KEEPASSXC_HARNESS) $(SWIFT) test --skip-build --no-parallel --disable-xctest \
	        --filter '$(KEEPASSXC_SUITES)'; } && \
	    echo "test: against KeePassXC with its confirmations and 'unlock before search' off ($(KEEPASSXC_CONFIRM_OFF_SUITES))" && \
	    { $(KEEPASSXC_OFF) $(KEEPASSXC_HARNESS) $(SWIFT) test --skip-build --no-parallel --disable-xctest \
	        --filter '$(KEEPASSXC_CONFIRM_OFF_SUITES)' || { $(KEEPASSXC_RETRY); \
	    $(KEEPASSXC_OFF) $(KEEPASSXC_HARNESS) $(SWIFT) test --skip-build --no-parallel --disable-xctest \
	        --filter '$(KEEPASSXC_CONFIRM_OFF_SUITES)'; }; }; \
	else \
	    echo "test: SKIPPED the KeePassXC part: keepassxc, Xvfb or xdotool is not installed ('make deps' installs them)"; \
	fi

# The same suite on Debian 13 "trixie" (SQLCipher 4.6.1, SQLite 3.46.1), from this Debian 12 host: a
# cached debootstrap root (DEBIAN13_ROOT; the first run builds it), the toolchain bound read-only, a fresh
# copy of the tree, `make test` inside. Runs as root (sudo otherwise). See Tests/Harness/debian13.
# Then the cross-version step: files the project writes here (SQLCipher 3.4) — a raw-key database, an export,
# a passphrase database and a crash image with a -wal — are read by the project built there (SQLCipher 4.6),
# and the same set written there is read here (`securestore-stress cross`, public test keys). Then sync between the
# two: a device here starts a sync group in a shared folder, a device there joins it and edits, and the one here
# syncs again and must hold the same rows (`securestore-stress sync init|join|check`, Docs/sync.md).
DEBIAN13_ROOT ?= /var/cache/securestore/debian13-root
CROSS := .build-cross
deps-debian13:
	$(call install-missing,$(HOST_PACKAGES_DEBIAN13))

test-debian13: deps-debian13
	$(FRESH_PLANS)
	$(SWIFT) build $(STRESS)
	rm -rf $(CROSS) && mkdir -p $(CROSS)
	$(STRESS_BIN) cross write $(CROSS)/debian12
	$(STRESS_BIN) sync init "$$(pwd)/$(CROSS)/sync" debian12
	@if [ "$$(id -u)" = 0 ]; then sudo=""; else sudo="sudo"; fi; \
	$$sudo env DEBIAN13_ROOT="$(DEBIAN13_ROOT)" DEBIAN13_SHARE="$$(pwd)/$(CROSS)" Tests/Harness/debian13 \
	    sh -c 'make test APT_OPTIONAL= && $(STRESS_BIN) cross read /share/debian12 \
	        && $(STRESS_BIN) cross write /share/debian13 && $(STRESS_BIN) sync join /share/sync debian13'; \
	status=$$?; [ "$$(id -u)" = 0 ] || $$sudo chown -R "$$(id -u):$$(id -g)" $(CROSS); exit $$status
	$(STRESS_BIN) cross read $(CROSS)/debian13
	$(STRESS_BIN) sync check "$$(pwd)/$(CROSS)/sync" debian12

demo: build
	$(HARNESS) Tests/Harness/demo .build/debug/securestore

# The installed tool carries the Swift runtime inside it (--static-swift-stdlib): it runs without the
# toolchain's libraries and starts in half the time (Docs/performance.md). Built in its own scratch folder.
STATIC := --static-swift-stdlib --scratch-path .build-static
# Where completion scripts and manual pages go under PREFIX: where bash-completion, zsh, fish and man look.
BASH_COMPLETION := share/bash-completion/completions/securestore
ZSH_COMPLETION := share/zsh/site-functions/_securestore
FISH_COMPLETION := share/fish/vendor_completions.d/securestore.fish
MAN1 := share/man/man1
# The watcher's systemd user unit (`sync watch`, Docs/sync.md "Syncing by itself"): where the user manager looks under
# PREFIX (/usr/local/lib/systemd/user, /usr/lib/systemd/user).
SYSTEMD_USER := lib/systemd/user
WATCH_UNIT := securestore-sync-watch@.service
install: deps
	$(SWIFT) build -c release $(STATIC) --product securestore
	install -d -m 0755 $(DESTDIR)$(PREFIX)/bin
	install -m 0755 -s .build-static/release/securestore $(DESTDIR)$(PREFIX)/bin/securestore
	ln -sf securestore $(DESTDIR)$(PREFIX)/bin/git-credential-securestore
	@echo "installed: $(DESTDIR)$(PREFIX)/bin/securestore (stripped, $$(du -h $(DESTDIR)$(PREFIX)/bin/securestore | cut -f1))"
	@echo "installed: $(DESTDIR)$(PREFIX)/bin/git-credential-securestore -> securestore (git credential helper)"
	@# Completion scripts and manual pages, generated now by the tool just built, from its command tree.
	@set -e; bin=.build-static/release/securestore; \
	for shell in bash zsh fish; do \
	    case $$shell in \
	    bash) file=$(DESTDIR)$(PREFIX)/$(BASH_COMPLETION) ;; \
	    zsh) file=$(DESTDIR)$(PREFIX)/$(ZSH_COMPLETION) ;; \
	    fish) file=$(DESTDIR)$(PREFIX)/$(FISH_COMPLETION) ;; \
	    esac; \
	    install -d -m 0755 "$$(dirname "$$file")"; \
	    $$bin completion $$shell > "$$file.tmp"; chmod 0644 "$$file.tmp"; mv "$$file.tmp" "$$file"; \
	    echo "installed: $$file ($$shell completion)"; \
	done; \
	install -d -m 0755 $(DESTDIR)$(PREFIX)/$(MAN1); \
	for group in "" $$($$bin man --list); do \
	    file=$(DESTDIR)$(PREFIX)/$(MAN1)/securestore$${group:+-$$group}.1; \
	    $$bin man $$group > "$$file.tmp"; chmod 0644 "$$file.tmp"; mv "$$file.tmp" "$$file"; \
	    echo "installed: $$file"; \
	done
	install -d -m 0755 $(DESTDIR)$(PREFIX)/$(SYSTEMD_USER)
	sed 's|@BINDIR@|$(PREFIX)/bin|g' Sources/SecureStoreTool/$(WATCH_UNIT).in > $(DESTDIR)$(PREFIX)/$(SYSTEMD_USER)/$(WATCH_UNIT).tmp
	chmod 0644 $(DESTDIR)$(PREFIX)/$(SYSTEMD_USER)/$(WATCH_UNIT).tmp
	mv $(DESTDIR)$(PREFIX)/$(SYSTEMD_USER)/$(WATCH_UNIT).tmp $(DESTDIR)$(PREFIX)/$(SYSTEMD_USER)/$(WATCH_UNIT)
	@echo "installed: $(DESTDIR)$(PREFIX)/$(SYSTEMD_USER)/$(WATCH_UNIT) (systemctl --user enable --now securestore-sync-watch@tasks)"

uninstall:
	rm -f $(DESTDIR)$(PREFIX)/bin/securestore $(DESTDIR)$(PREFIX)/bin/git-credential-securestore
	rm -f $(DESTDIR)$(PREFIX)/$(BASH_COMPLETION) $(DESTDIR)$(PREFIX)/$(ZSH_COMPLETION) $(DESTDIR)$(PREFIX)/$(FISH_COMPLETION)
	rm -f $(DESTDIR)$(PREFIX)/$(MAN1)/securestore.1 $(DESTDIR)$(PREFIX)/$(MAN1)/securestore-*.1
	rm -f $(DESTDIR)$(PREFIX)/$(SYSTEMD_USER)/$(WATCH_UNIT)

# Benchmarks, release build, side by side with baselines (plain libsqlite3 in its own process, libsecret's
# C API, UserDefaults); ends with one "BENCH <workload> project=… baseline=… ratio=…" line per workload.
# The project side is built as `make install` builds the tool; the baseline with the default dynamic runtime.
bench: deps
	$(FRESH_PLANS)
	$(SWIFT) build $(BENCHMARKS) -c release --static-swift-stdlib --scratch-path Tests/Benchmarks/.build-static \
	    --product securestore-bench
	$(SWIFT) build $(BENCHMARKS) -c release --static-swift-stdlib --scratch-path Tests/Benchmarks/.build-static \
	    --product securestore-bench-grdb
	$(SWIFT) build $(BENCHMARKS) -c release --product securestore-bench-baseline
	cc -O2 -Wall -o Tests/Benchmarks/.build-static/release/securestore-bench-c \
	    Tests/Benchmarks/CBaseline/securestore-bench-c.c $$(pkg-config --cflags --libs sqlcipher)
	$(HARNESS) Tests/Benchmarks/run-bench.sh --bin Tests/Benchmarks/.build-static/release \
	    --baseline-bin Tests/Benchmarks/.build/release
	$(MAKE) bench-keystores
	$(MAKE) bench-attachments
	$(MAKE) bench-sync

# Key stores (Docs/keystores.md): whole processes of the release tool — a token read from the key file through the
# kernel-keyring cache against the Secret Service, the first unlock (scrypt) against a cached one, and the task list's
# launch on each store; interleaved pairs, "BENCH <workload> project=… baseline=… ratio=…".
KEYSTORE_PAIRS ?= 15
# The tool as `make install` builds it (the Swift runtime inside it: most of a short command's time is loading).
bench-keystores: deps
	$(SWIFT) build -c release $(STATIC) --product securestore
	$(HARNESS) Tests/Benchmarks/run-keystore-bench.sh --tool "$$(pwd)/.build-static/release/securestore" --pairs $(KEYSTORE_PAIRS)

# Attachments (Docs/attachments.md): AttachmentStore beside plain files, a plain SQLite BLOB and a BLOB in the
# SQLCipher database, 4 KB to 53 MB, interleaved rounds, warm reads then cold reads (page cache dropped per object);
# one "ATTACH <operation> <size> …" line per size and operation, then a table, for each. Then the task list's launch
# and 200k fetch with 1 GB of attachments stored against none ("TASKS launch|fetch … ratio=…"; ~1.1 GB of disk
# for a minute, removed).
ATTACHMENT_PAIRS ?= 3
bench-attachments: deps
	$(FRESH_PLANS)
	$(SWIFT) build $(BENCHMARKS) -c release --static-swift-stdlib --scratch-path Tests/Benchmarks/.build-static \
	    --product securestore-bench-attachments
	$(SWIFT) build $(BENCHMARKS) -c release --product securestore-bench-attachments-baseline
	Tests/Benchmarks/run-attachment-bench.sh --bin Tests/Benchmarks/.build-static/release \
	    --baseline-bin Tests/Benchmarks/.build/release --pairs $(ATTACHMENT_PAIRS)
	Tests/Benchmarks/run-attachment-bench.sh --bin Tests/Benchmarks/.build-static/release \
	    --baseline-bin Tests/Benchmarks/.build/release --pairs $(ATTACHMENT_PAIRS) --cold
	$(SWIFT) build $(BENCHMARKS) -c release --static-swift-stdlib --scratch-path Tests/Benchmarks/.build-static \
	    --product securestore-bench-attachments-tasks
	dir=$$(mktemp -d "$${TMPDIR:-/tmp}/securestore-attachment-tasks.XXXXXX") && \
	    Tests/Benchmarks/.build-static/release/securestore-bench-attachments-tasks run "$$dir" --pairs 9; \
	    status=$$?; rm -rf "$$dir"; exit $$status

# Sync (Docs/sync.md): whole processes of the release tool — a new device joining a folder that holds SYNC_TASKS tasks
# against `tasks export` + `tasks import` of the same tasks, and one change end to end (add, send, receive) against the
# add alone; interleaved pairs, "BENCH <workload> project=… baseline=… ratio=…", and the remote's bytes per task.
SYNC_TASKS ?= 10000
SYNC_PAIRS ?= 5
bench-sync: deps
	$(SWIFT) build -c release --product securestore
	$(HARNESS) Tests/Benchmarks/run-sync-bench.sh --tool "$$(pwd)/.build/release/securestore" --tasks $(SYNC_TASKS) --pairs $(SYNC_PAIRS)
	@# A join through a snapshot where every task has five versions (issue 35 part 4: goal <= 0.5x every bundle).
	SYNC_SNAPSHOT_ONLY=1 $(HARNESS) Tests/Benchmarks/run-sync-bench.sh --tool "$$(pwd)/.build/release/securestore" \
	    --tasks $(SYNC_TASKS) --pairs 3 --edits 4
	@# One change end to end in one process: the engine's own time, without process starts (Docs/performance.md).
	$(SWIFT) build $(BENCHMARKS) -c release --product securestore-bench-sync
	d=$$(mktemp -d) && $(HARNESS) Tests/Benchmarks/.build/release/securestore-bench-sync "$$d" --tasks $(SYNC_TASKS) \
	    --pairs 15; rc=$$?; rm -rf "$$d"; exit $$rc

# What `sync watch` costs while nothing happens (Docs/performance.md, "Syncing by itself"): a folder watcher and a git
# watcher left alone WATCH_IDLE_SECONDS (10 minutes), their CPU time from /proc/<pid>/stat; "BENCH watch-idle-… cpu-ms=…".
WATCH_IDLE_SECONDS ?= 600
bench-watch-idle: deps
	$(SWIFT) build -c release --product securestore
	$(HARNESS) Tests/Benchmarks/measure-watch-idle.sh --tool "$$(pwd)/.build/release/securestore" --seconds $(WATCH_IDLE_SECONDS)

# kill -9 at random moments, hundreds of times, plus concurrent writers; ends with "SOAK kills=N lost=N damaged=N".
SOAK_KILLS ?= 400
soak: build
	$(FRESH_PLANS)
	$(SWIFT) build $(STRESS)
	$(HARNESS) timeout 600 Tests/Soak/run-soak.sh $(SOAK_KILLS)

# Fuzz the preferences reader and the argument parser (libFuzzer + ASan from the toolchain), FUZZ_SECONDS each.
FUZZ_SECONDS ?= 60
fuzz: deps
	Tests/Fuzz/run-fuzz.sh $(FUZZ_SECONDS)

clean:
	rm -rf .build .build-static .build-fuzz .build-cross .build-doc-examples Tests/Benchmarks/.build Tests/Benchmarks/.build-static \
	    Tests/Stress/.build
