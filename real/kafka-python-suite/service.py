"""kafkasim's stand-in for kafka-python's ``test/service.py``, which the 3.0.12 sdist omits.

Written for kafkasim (not copied from kafka-python). ``test/integration/fixtures.py`` imports two
names from it:

* ``ExternalService(host, port)``: a broker that someone else runs. With ``KAFKA_URI`` set, the
  suite wraps kafkasim in one of these; it has no process and nothing to stop.
* ``SpawnedService(args, env)``: a child process whose output can be waited on with a regex. Only
  the fixtures that start their own Kafka or ZooKeeper use it; run.py deselects the tests that
  need those (SASL/SSL), so this minimal version exists for the import and for completeness.
"""

import re
import subprocess
import threading
import time


class ExternalService:
    def __init__(self, host, port):
        self.host = host
        self.port = port

    def open(self):
        pass

    def close(self):
        pass

    def dump_logs(self):
        pass


class SpawnedService:
    def __init__(self, args=None, env=None):
        self.args = list(args or [])
        self.env = env
        self.child = None
        self.lines = []
        self._reader = None

    def _read(self):
        for line in self.child.stdout:
            self.lines.append(line.rstrip('\n'))

    def start(self):
        self.child = subprocess.Popen(self.args, env=self.env, stdout=subprocess.PIPE,
                                      stderr=subprocess.STDOUT, text=True)
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def wait_for(self, pattern, timeout=30):
        deadline = time.monotonic() + timeout
        regex = re.compile(pattern, re.IGNORECASE)
        while time.monotonic() < deadline:
            if any(regex.search(line) for line in list(self.lines)):
                return True
            if self.child.poll() is not None and not self._reader.is_alive():
                return False
            time.sleep(0.1)
        return False

    def stop(self):
        if self.child is None:
            return
        self.child.terminate()
        try:
            self.child.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.child.kill()
            self.child.wait()
        self.child = None

    def dump_logs(self):
        for line in self.lines:
            print(line)
