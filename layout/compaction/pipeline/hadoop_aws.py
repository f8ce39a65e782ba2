"""The S3A connector for the Spark that runs the job: which jars, of which versions, a pom to fetch them with,
and the `spark.jars` value that names them (`lakesort spark-jars`).

Spark's jars hold no object-store connector. For S3 that is Hadoop's S3A, `org.apache.hadoop:hadoop-aws`, of
exactly the Hadoop version the Spark ships (the `hadoop-client-api-<version>.jar` in its `jars/`), with the
AWS SDK version hadoop-project declares for that Hadoop. From Hadoop 3.4 S3A runs on the AWS SDK v2, and
hadoop-aws depends on the SDK's `bundle` (600 MB, every AWS service): the pom here takes the SDK modules S3A
uses instead (`s3`, `s3-transfer-manager`, `sts`), as testbed/maven/s3a.pom.xml does. Hadoop 3.3 (Spark 3.5)
runs S3A on the SDK v1, whose `aws-java-sdk-bundle` hadoop-aws brings itself. Jars Spark already ships
(Netty, SLF4J, commons-codec, commons-logging, Apache HttpComponents) are left out when the jars are copied
(`EXCLUDED_GROUPS`): two versions of a class on one class path fail at run time, not at start.

lakesort never downloads at run time: the jars are fetched once, with Maven (`fetch`), and given to every
spark-submit by `spark.jars` (or copied into the Spark's `jars/`), never by `spark.jars.packages`.

May import: the standard library, the ground floor (errors, models) and `spark_home`
(which Spark runs the job).
"""

from __future__ import annotations

import re
import shutil
import subprocess
import tempfile
from pathlib import Path
from xml.sax.saxutils import escape

from layout.compaction.pipeline.spark_home import check_supported
from layout.errors import InputError, LakesortError, UsageError
from layout.models import Frozen

__all__ = ["EXCLUDED_GROUPS", "SDK_OF_HADOOP", "AwsSdk", "Dependency", "FetchFailed", "S3AJars",
           "copy_command", "fetch", "find_mvn", "hadoop_version_in", "jars_of_spark_in_use", "pom_text",
           "s3a_jars", "spark_jars_value"]

HADOOP_CLIENT_JAR = re.compile(r"^hadoop-client-api-(\d+\.\d+\.\d+[\w.+-]*?)\.jar$")


class AwsSdk(Frozen):
    """The AWS SDK for Java a Hadoop's S3A is built against: major version 1 or 2, and the version."""

    major: int
    version: str


# The AWS SDK each Hadoop's S3A is built against: hadoop-project-<hadoop>.pom on Maven Central
# (https://repo1.maven.org/maven2/org/apache/hadoop/hadoop-project/<hadoop>/hadoop-project-<hadoop>.pom),
# property `aws-java-sdk-v2.version` from Hadoop 3.4.0 (S3A moved to the SDK v2 there: HADOOP-18073), else
# `aws-java-sdk.version`. Read from those poms when this table was written:
#   3.3.4 aws-java-sdk.version 1.12.262                               (Spark 3.5)
#   3.3.6 aws-java-sdk.version 1.12.367
#   3.4.0 aws-java-sdk-v2.version 2.23.19
#   3.4.1 aws-java-sdk-v2.version 2.24.6                              (Spark 4.0)
#   3.4.2 aws-java-sdk-v2.version 2.29.52                             (Spark 4.1)
#   3.5.0 aws-java-sdk-v2.version 2.35.4                              (Spark 4.2)
# A new Hadoop: read its hadoop-project pom and add a line (tests/compaction/pipeline/test_hadoop_aws.py).
SDK_OF_HADOOP: dict[str, AwsSdk] = {
    "3.3.4": AwsSdk(major=1, version="1.12.262"),
    "3.3.6": AwsSdk(major=1, version="1.12.367"),
    "3.4.0": AwsSdk(major=2, version="2.23.19"),
    "3.4.1": AwsSdk(major=2, version="2.24.6"),
    "3.4.2": AwsSdk(major=2, version="2.29.52"),
    "3.5.0": AwsSdk(major=2, version="2.35.4"),
}

# Spark's binding of S3A's committers (PathOutputCommitProtocol), for the Spark that ships each Hadoop: with
# it the job writes through the magic committer instead of renames, which S3 does as copies (jobs/compaction/
# storage.py). Spark 4.2's own (4.2.0) is not on Maven Central, only its previews: 4.1.2's classes bind the
# same Hadoop API (tests/object_stores runs them on Spark 4.2). Its dependencies are Spark's own: all
# excluded. Spark 3.5 (Hadoop 3.3) is left out: its Scala 2.12 build would need the Spark's Scala version.
SPARK_CLOUD_OF_HADOOP: dict[str, tuple[str, str]] = {
    "3.4.1": ("spark-hadoop-cloud_2.13", "4.0.2"),
    "3.4.2": ("spark-hadoop-cloud_2.13", "4.1.2"),
    "3.5.0": ("spark-hadoop-cloud_2.13", "4.1.2"),
}

# Left out when the jars are copied: Spark ships its own
# (`mvn dependency:copy-dependencies -DexcludeGroupIds`).
EXCLUDED_GROUPS = ("io.netty", "org.slf4j", "commons-codec", "commons-logging", "org.apache.httpcomponents")
# The SDK v2 modules S3A uses, in place of the SDK's `bundle`.
SDK_V2_MODULES = ("s3", "s3-transfer-manager", "sts")
SDK_V2_GROUP = "software.amazon.awssdk"


class FetchFailed(LakesortError):
    """Maven could not fetch the jars (not cached offline, no network, no such version)."""


class Dependency(Frozen):
    """A Maven dependency of the pom, with the (groupId, artifactId) pairs it excludes."""

    group: str
    artifact: str
    version: str
    exclusions: tuple[tuple[str, str], ...] = ()

    @property
    def coordinate(self) -> str:
        return f"{self.group}:{self.artifact}:{self.version}"


class S3AJars(Frozen):
    """What S3A needs on the class path of a Spark built with `hadoop_version`."""

    hadoop_version: str
    sdk: AwsSdk
    dependencies: tuple[Dependency, ...]

    @property
    def coordinates(self) -> list[str]:
        return [d.coordinate for d in self.dependencies]


def hadoop_version_in(jars_dir: Path) -> str:
    """The Hadoop version of the Spark whose `jars/` is `jars_dir`, from its
    `hadoop-client-api-<version>.jar`. InputError when there is none
    (a Spark built without Hadoop) or several versions."""
    if not jars_dir.is_dir():
        raise InputError(f"{jars_dir}: no such directory (a Spark's jars/ was expected)")
    found = sorted({m.group(1) for p in jars_dir.iterdir() if (m := HADOOP_CLIENT_JAR.match(p.name))})
    if not found:
        raise InputError(f"{jars_dir} holds no hadoop-client-api-<version>.jar: this Spark ships no Hadoop "
                         "client (a 'without hadoop' build uses the cluster's Hadoop). Pass that Hadoop's "
                         "version with --hadoop-version")
    if len(found) > 1:
        raise InputError(f"{jars_dir} holds hadoop-client-api jars of several versions ({', '.join(found)}): "
                         "remove the extra ones, or pass the Hadoop version with --hadoop-version")
    return found[0]


def jars_of_spark_in_use() -> Path:
    """The `jars/` directory of the Spark lakesort runs the job on ($SPARK_HOME, else the installed pyspark).
    SparkUnsupported (an InputError) for a Spark the job does not run on;
    InputError when its home is unknown."""
    install = check_supported()
    if install.home is None:
        raise InputError(f"{install.spark_submit}: where its Spark lives cannot be told (a wrapper script?): "
                         "set SPARK_HOME, or pass the Hadoop version with --hadoop-version")
    return Path(install.home) / "jars"


def s3a_jars(hadoop_version: str) -> S3AJars:
    """hadoop-aws of `hadoop_version` and the AWS SDK it needs. InputError for a Hadoop not in
    `SDK_OF_HADOOP`."""
    sdk = SDK_OF_HADOOP.get(hadoop_version)
    if sdk is None:
        known = ", ".join(SDK_OF_HADOOP)
        raise InputError(
            f"Hadoop {hadoop_version}: lakesort does not know which AWS SDK its S3A is built against (known: "
            f"{known}). Read `aws-java-sdk-v2.version` (Hadoop 3.4+) in hadoop-project-{hadoop_version}.pom "
            "on Maven Central and add it to SDK_OF_HADOOP in layout/compaction/pipeline/hadoop_aws.py, or "
            "run the job on a Spark that ships one of the known Hadoop versions")
    excluded = [("org.wildfly.openssl", "wildfly-openssl")]  # optional native TLS, never loaded by default
    if sdk.major == 1:
        # Hadoop 3.3: hadoop-aws depends on com.amazonaws:aws-java-sdk-bundle of this version (no modular
        # alternative S3A supports); it comes through hadoop-aws.
        return S3AJars(hadoop_version=hadoop_version, sdk=sdk, dependencies=(
            Dependency(group="org.apache.hadoop", artifact="hadoop-aws", version=hadoop_version,
                       exclusions=tuple(excluded)),))
    hadoop_aws = Dependency(group="org.apache.hadoop", artifact="hadoop-aws", version=hadoop_version,
                            exclusions=((SDK_V2_GROUP, "bundle"), *excluded))
    modules = tuple(
        Dependency(group=SDK_V2_GROUP, artifact=module, version=sdk.version,
                   # as testbed/maven/s3a.pom.xml (sts still brings netty-nio-client; its io.netty is Spark's)
                   exclusions=((SDK_V2_GROUP, "netty-nio-client"),) if module == "s3" else ())
        for module in SDK_V2_MODULES)
    cloud = SPARK_CLOUD_OF_HADOOP.get(hadoop_version)
    binding = () if cloud is None else (Dependency(group="org.apache.spark", artifact=cloud[0],
                                                   version=cloud[1], exclusions=(("*", "*"),)),)
    return S3AJars(hadoop_version=hadoop_version, sdk=sdk, dependencies=(hadoop_aws, *modules, *binding))


def pom_text(jars: S3AJars) -> str:
    """A pom whose dependencies are `jars`' (packaging pom: nothing to build), for `mvn
    dependency:copy-dependencies` with `copy_command`."""
    lines = [
        '<?xml version="1.0" encoding="UTF-8"?>',
        # No two dashes in a row inside an XML comment: Maven refuses the pom.
        (f"<!-- The S3A connector for a Spark built with Hadoop {jars.hadoop_version} "
         f"(AWS SDK v{jars.sdk.major} {jars.sdk.version}, hadoop-project's version), written by lakesort "
         "spark-jars."),
        ("     Copy the jars with Maven's dependency:copy-dependencies goal, runtime scope, leaving out "
         "the groups"),
        (f"     Spark ships: {','.join(EXCLUDED_GROUPS)} (lakesort spark-jars does it with its fetch "
         "option). -->"),
        '<project xmlns="http://maven.apache.org/POM/4.0.0">',
        "  <modelVersion>4.0.0</modelVersion>",
        "  <groupId>lakesort</groupId>",
        f"  <artifactId>s3a-hadoop-{escape(jars.hadoop_version)}</artifactId>",
        "  <version>1</version>",
        "  <packaging>pom</packaging>",
        "  <dependencies>",
    ]
    for dep in jars.dependencies:
        lines += ["    <dependency>",
                  f"      <groupId>{escape(dep.group)}</groupId>",
                  f"      <artifactId>{escape(dep.artifact)}</artifactId>",
                  f"      <version>{escape(dep.version)}</version>"]
        if dep.exclusions:
            lines.append("      <exclusions>")
            lines += [f"        <exclusion><groupId>{escape(g)}</groupId><artifactId>{escape(a)}</artifactId>"
                      "</exclusion>" for g, a in dep.exclusions]
            lines.append("      </exclusions>")
        lines.append("    </dependency>")
    lines += ["  </dependencies>", "</project>", ""]
    return "\n".join(lines)


def copy_command(mvn: str, pom: Path, out_dir: Path, *, offline: bool = False) -> list[str]:
    """The Maven command that copies the pom's runtime dependencies into `out_dir`,
    leaving out what Spark ships."""
    return [mvn, "--batch-mode", "--quiet", "-Dstyle.color=never", *(["--offline"] if offline else []), "-f",
            str(pom), "dependency:copy-dependencies", "-DincludeScope=runtime",
            f"-DexcludeGroupIds={','.join(EXCLUDED_GROUPS)}", f"-DoutputDirectory={out_dir}"]


def find_mvn() -> str:
    """The `mvn` on PATH, or a UsageError (exit 2) saying how to get it: asked before any work."""
    mvn = shutil.which("mvn")
    if mvn is None:
        raise UsageError("--fetch runs Maven, and `mvn` is not on PATH: install Maven 3 (e.g. apt-get "
                         "install maven), or use --print-pom and fetch the jars where Maven is")
    return mvn


def fetch(jars: S3AJars, out_dir: Path, *, mvn: str, offline: bool = False) -> list[Path]:
    """Copy `jars` (and what they depend on, less `EXCLUDED_GROUPS`) into `out_dir` with Maven; the jar paths,
    sorted. Jars already in `out_dir` that are not of this set stay, and are not returned. FetchFailed
    (exit 1) naming Maven's last lines when it fails."""
    with tempfile.TemporaryDirectory(prefix="lakesort-spark-jars-") as tmp:
        pom, copied = Path(tmp) / "pom.xml", Path(tmp) / "jars"
        pom.write_text(pom_text(jars))
        done = subprocess.run(copy_command(mvn, pom, copied, offline=offline), capture_output=True, text=True,
                              check=False)
        names = sorted(p.name for p in copied.glob("*.jar")) if copied.is_dir() else []
        if done.returncode != 0 or not names:
            said = "\n".join(_maven_errors(done.stdout + done.stderr))
            raise FetchFailed(f"Maven could not copy {', '.join(jars.coordinates)} (exit {done.returncode})"
                              f"{' offline: are they in the local repository?' if offline else ''}\n{said}")
        out_dir.mkdir(parents=True, exist_ok=True)
        for name in names:
            shutil.move(copied / name, out_dir / name)
    return [(out_dir / name).absolute() for name in names]


def _maven_errors(output: str, most: int = 8) -> list[str]:
    """Maven's error lines that say what went wrong (not its advice on -e, -X and the wiki),
    colours removed."""
    lines = [re.sub(r"\x1b\[[0-9;]*m", "", line).rstrip() for line in output.splitlines()]
    boilerplate = ("-e switch", "-X switch", "] [Help ", "For more information")
    errors = [line for line in lines if ("[ERROR]" in line or "[FATAL]" in line)
              and line.replace("[ERROR]", "").strip() and not any(b in line for b in boilerplate)]
    return (errors or [line for line in lines if line.strip()])[:most]


def spark_jars_value(paths: list[Path]) -> str:
    """The `spark.jars` value naming `paths`: comma-separated, as spark-defaults.conf and --conf take it."""
    return ",".join(str(p) for p in paths)
