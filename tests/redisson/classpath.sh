# Sourced by the scripts that run real Redisson: redisson_classpath RELEASE prints the
# Java class path of that release's offline jar (REDISSON_DIR, default
# /work/shared/redisson) and the Debian jars it runs on (/work/shared/redisson/README.md);
# it fails with a message naming the missing jar. redisson_protocol reads PROTOCOL.
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

# PROTOCOL (RESP2, the default, or RESP3: Config.setProtocol, which 3.16.8 lacks) sets
# protocol_arg, the driver's argument naming it (none for RESP2), and protocol_suffix,
# the recordings' name suffix (-resp3); any other value fails.
redisson_protocol() {
  case ${PROTOCOL:-RESP2} in
    RESP2) protocol_arg=(); protocol_suffix= ;;
    RESP3) protocol_arg=(RESP3); protocol_suffix=-resp3 ;;
    *) echo "PROTOCOL is RESP2 or RESP3, not $PROTOCOL" >&2; return 1 ;;
  esac
}
