/*
 * Kafka Streams' own window store key layout, as an oracle for streamtasks.state.window.
 *
 * Reads lines "<key hex> <window start> <seqnum>" from stdin ("-" is an empty key) and prints,
 * per line, "<store key hex> <key hex> <start>": the bytes WindowKeySchema.toStoreKeyBinary makes,
 * and the key and window start WindowKeySchema.fromStoreKey reads back from them.
 */
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.util.HexFormat;

import org.apache.kafka.common.header.internals.RecordHeaders;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.common.utils.Bytes;
import org.apache.kafka.streams.kstream.Windowed;
import org.apache.kafka.streams.state.internals.WindowKeySchema;

public final class WindowKeys {
    private WindowKeys() {
    }

    public static void main(final String[] args) throws Exception {
        final HexFormat hex = HexFormat.of();
        final BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        final StringBuilder out = new StringBuilder();
        String line;
        while ((line = in.readLine()) != null) {
            if (line.isBlank()) {
                continue;
            }
            final String[] parts = line.trim().split(" ");
            final byte[] key = "-".equals(parts[0]) ? new byte[0] : hex.parseHex(parts[0]);
            final long start = Long.parseLong(parts[1]);
            final int seqnum = Integer.parseInt(parts[2]);
            final byte[] stored = WindowKeySchema.toStoreKeyBinary(Bytes.wrap(key), start, seqnum).get();
            final Windowed<byte[]> back = WindowKeySchema.fromStoreKey(
                stored, 60_000L, new ByteArrayDeserializer(), new RecordHeaders(), "changelog");
            final byte[] backKey = back.key();
            out.append(hex.formatHex(stored)).append(' ')
                .append(backKey.length == 0 ? "-" : hex.formatHex(backKey)).append(' ')
                .append(back.window().start()).append('\n');
        }
        System.out.print(out);
    }
}
