"""Compiling and running the repository's one-file Java programs against Kafka's jars.

The interop peer (``java/peer``) and the assignor oracles (``java/oracle``) are single ``.java``
files compiled at first use with ``javac`` against a classpath that Maven resolved
(:func:`streamtasks.embedded.kafka_broker.kafka_classpath`). :func:`compiled_program` compiles a
source once per source, classpath and JDK (the hash of all three names the cache directory,
``$XDG_CACHE_HOME/streamtasks/<cache>/<hash>/``) and says how to run it::

    program = compiled_program(Path("java/oracle/src/Oracle.java"), jars, cache="java-oracle")
    subprocess.run(program.command("-Xmx2g"), input=request, capture_output=True)

Concurrent first uses wait on a lock file; a failed compile leaves no cache entry behind.
:class:`JavaUnavailable` says what to install when there is no JDK 17+.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import shutil
import subprocess
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from streamtasks.embedded.kafka_broker import JAVA_MIN_VERSION, java_version, kafka_classpath
from streamtasks.errors import BrokerError, StreamTasksError

__all__ = [
    "JDK_INSTALL_HINT",
    "PEER_CONSUMER_SOURCE",
    "PEER_JVM_OPTIONS",
    "JavaProgram",
    "JavaUnavailable",
    "compiled_program",
    "jdk_missing",
    "peer_consumer",
]

#: What to tell someone whose machine cannot compile or run the Java programs.
JDK_INSTALL_HINT = (
    "install a JDK 17+ with javac, and Maven (Debian/Ubuntu: apt-get install openjdk-17-jdk-headless maven)"
)


#: The Java peer consumer's one source file (``java/peer`` of the checkout): kafka-clients'
#: ``KafkaConsumer`` in the interop tests and the drills' ``--library java`` reference group.
PEER_CONSUMER_SOURCE = Path(__file__).resolve().parents[2] / "java" / "peer" / "src" / "PeerConsumer.java"
#: A small heap and no optimising compiler: a peer polls a few records a second on a shared machine.
PEER_JVM_OPTIONS = ("-Xms32m", "-Xmx256m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1")


class JavaUnavailable(StreamTasksError):
    """This machine cannot compile or run a Java program (the message says what to install)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class JavaProgram:
    """A compiled one-file program: the directory of its classes and the jars it runs with."""

    java: str
    classes: Path
    classpath: tuple[str, ...]
    main_class: str

    def command(self, *jvm_options: str) -> list[str]:
        """``java [jvm_options] -cp <classes:jars> <main_class>``."""
        cp = os.pathsep.join((str(self.classes), *self.classpath))
        return [self.java, *jvm_options, "-cp", cp, self.main_class]


def jdk_missing() -> str | None:
    """Why no Java program can be compiled here (``"no javac on PATH"``, ...), or None."""
    for tool in ("java", "javac"):
        if shutil.which(tool) is None:
            return f"no {tool} on PATH"
    java = shutil.which("java") or "java"
    major = java_version(java)
    if major is None or major < JAVA_MIN_VERSION:
        return f"java on PATH is version {major or 'unknown'}, Kafka 4 needs {JAVA_MIN_VERSION}+"
    return None


def _cache_root() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "streamtasks"


def compiled_program(
    source: Path, classpath: Sequence[str], *, cache: str, main_class: str | None = None
) -> JavaProgram:
    """Compile ``source`` (one ``.java`` file, Java 17, warnings are errors) against
    ``classpath`` once, cached under ``$XDG_CACHE_HOME/streamtasks/<cache>/``; ``main_class``
    defaults to the file's name. Raises :class:`JavaUnavailable` without a JDK 17+ and
    :class:`StreamTasksError` with javac's output when the source does not compile."""
    missing = jdk_missing()
    if missing is not None:
        raise JavaUnavailable(f"{missing}: {JDK_INSTALL_HINT}")
    java, javac = shutil.which("java") or "java", shutil.which("javac") or "javac"
    main = main_class or source.stem
    jdk = f"{os.path.realpath(javac)}:{java_version(java)}"
    key = b"\0".join((source.read_bytes(), os.pathsep.join(classpath).encode(), jdk.encode()))
    digest = hashlib.sha256(key).hexdigest()[:16]
    base = _cache_root() / cache
    classes = base / digest
    base.mkdir(parents=True, exist_ok=True)
    with (base / "compile.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (classes / f"{main}.class").is_file():
            partial = Path(tempfile.mkdtemp(prefix=f"{digest}-", dir=base))
            command = [
                *(javac, "--release", "17", "-proc:none", "-Xlint:all", "-Werror", "-d", str(partial)),
                *("-cp", os.pathsep.join(classpath), str(source)),
            ]
            done = subprocess.run(command, capture_output=True, text=True, timeout=300, check=False)
            if done.returncode != 0:
                shutil.rmtree(partial, ignore_errors=True)
                raise StreamTasksError(f"javac failed on {source}:\n{done.stdout}{done.stderr}")
            shutil.rmtree(classes, ignore_errors=True)
            partial.rename(classes)
    return JavaProgram(java=java, classes=classes, classpath=tuple(classpath), main_class=main)


def peer_consumer() -> JavaProgram:
    """``java/peer``'s ``PeerConsumer`` compiled against the embedded broker's jars (its
    kafka-clients is the broker's version); :class:`JavaUnavailable` says what is missing."""
    try:
        classpath = kafka_classpath()  # the broker's jars include kafka-clients and slf4j
    except BrokerError as exc:
        raise JavaUnavailable(f"the kafka-clients jar is not available: {exc}") from exc
    return compiled_program(PEER_CONSUMER_SOURCE, classpath, cache="java-peer")
