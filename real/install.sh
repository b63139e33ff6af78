#!/usr/bin/env bash
# Installs everything kafkasim's tests need on a fresh machine of this project's kind:
# Debian's ZooKeeper and kcat, the Python package with its test extras, and Apache Kafka's
# reference jars (protocol JSON, kafka-dump-log) from Maven Central.
set -euo pipefail
cd "$(dirname "$0")/.."
SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO="sudo"
if ! command -v kcat >/dev/null 2>&1 || [ ! -f /usr/share/java/zookeeper.jar ]; then
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq zookeeper kcat >/dev/null
fi
python3 -m pip install -q --disable-pip-version-check -e '.[test]'
if [ ! -f real/maven/lib/.complete ]; then
  (cd real/maven && mvn -q -B dependency:copy-dependencies -DoutputDirectory=lib && touch lib/.complete)
fi
