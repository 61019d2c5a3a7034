// The protocol a driver's Redisson speaks: config.setProtocol(Protocol.valueOf(name)), by
// reflection, so the drivers still compile against releases without it (3.16.8 has no
// Protocol and speaks RESP2 only; 3.27.2 and 4.7.0 speak RESP2 by default, or RESP3).
import org.redisson.config.Config;

final class RedissonProtocol {
    private RedissonProtocol() {}

    @SuppressWarnings({"unchecked", "rawtypes"})
    static void set(Config config, String name) throws Exception {
        Class protocol = Class.forName("org.redisson.config.Protocol");
        Config.class.getMethod("setProtocol", protocol).invoke(config, Enum.valueOf(protocol, name));
    }
}
