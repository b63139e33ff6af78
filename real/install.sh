#!/usr/bin/env bash
# Installs everything kafkasim's tests need on a fresh machine of this project's kind:
# Debian's ZooKeeper, kcat and Chromium, the Python package with its test extras, and Apache Kafka's
# reference jars (protocol JSON, kafka-dump-log) from Maven Central.
set -euo pipefail
cd "$(dirname "$0")/.."
SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO="sudo"
# chromium: the HTML report's browser tests (tests/report/test_browser.py) open it headless.
if ! command -v kcat >/dev/null 2>&1 || [ ! -f /usr/share/java/zookeeper.jar ] || ! command -v chromium >/dev/null 2>&1; then
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq zookeeper kcat chromium >/dev/null
fi
python3 -m pip install -q --disable-pip-version-check -e '.[test]'
# The native build: the simulator's hot modules compiled by mypyc (kafkasim/runtime/native.py), about
# 3 minutes from scratch on 2 cores. A failed build leaves kafkasim pure, and says so.
python3 real/build_native.py || echo "native build failed: kafkasim runs pure Python (slower, same results)"
if [ ! -f real/maven/lib/.complete ]; then
  (cd real/maven && mvn -q -B dependency:copy-dependencies -DoutputDirectory=lib && touch lib/.complete)
fi

# Client drivers (real/clients/<client>/driver, protocol in real/clients/README.md). Each step is
# skipped when its stamp matches the files it was built from.
stamp_ok() { [ -f "$1" ] && [ "$(cat "$1")" = "$2" ]; }
python3 -c 'import snappy' 2>/dev/null || python3 -m pip install -q --disable-pip-version-check 'python-snappy>=0.7,<1'
(
  cd real/clients/kafkajs
  want="$(sha256sum package-lock.json | cut -d' ' -f1)"
  stamp_ok node_modules/.kafkasim-stamp "$want" || { npm ci --no-audit --no-fund --loglevel=error && echo "$want" > node_modules/.kafkasim-stamp; }
)
(
  cd real/clients/java
  want="$(cat pom.xml src/*.java | sha256sum | cut -d' ' -f1)"
  if ! stamp_ok classes/.kafkasim-stamp "$want"; then
    rm -rf lib classes
    mvn -q -B dependency:copy-dependencies -DoutputDirectory=lib
    javac -nowarn -d classes -cp 'lib/*' src/*.java
    echo "$want" > classes/.kafkasim-stamp
  fi
)
(
  cd real/clients/franz-go
  want="$(cat go.mod go.sum *.go | sha256sum | cut -d' ' -f1)"
  stamp_ok bin/.kafkasim-stamp "$want" || { go build -mod=readonly -o bin/driver . && echo "$want" > bin/.kafkasim-stamp; }
)

# kafka-python's own integration tests: its 3.0.12 sdist from PyPI, unpacked under
# real/kafka-python-suite/work/ (skipped when already there).
python3 real/kafka-python-suite/run.py --fetch-only >/dev/null
