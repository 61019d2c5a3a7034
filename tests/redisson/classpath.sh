# Sourced by the scripts that run real Redisson: redisson_classpath RELEASE prints the
# Java class path of that release's offline jar (REDISSON_DIR, default
# /work/shared/redisson) and the Debian jars it runs on (/work/shared/redisson/README.md);
# it fails with a message naming the missing jar.
redisson_classpath() {
  local jar=${REDISSON_DIR:-/work/shared/redisson}/redisson-$1-offline.jar
  [ -f "$jar" ] || { echo "no $jar" >&2; return 1; }
  local cp=$jar j
  for j in netty-buffer netty-codec netty-codec-dns netty-common netty-handler netty-resolver netty-resolver-dns \
           netty-transport netty-transport-native-epoll netty-transport-native-kqueue netty-transport-native-unix-common \
           jackson-databind jackson-core jackson-annotations jackson-dataformat-yaml snakeyaml byte-buddy slf4j-api \
           geronimo-jcache-1.0-spec slf4j-simple; do
    cp=$cp:/usr/share/java/$j.jar
  done
  echo "$cp"
}
