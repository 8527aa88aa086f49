import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collection;
import java.util.List;
import java.util.Properties;

import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRebalanceListener;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.CooperativeStickyAssignor;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.common.KafkaException;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.errors.WakeupException;
import org.apache.kafka.common.serialization.StringDeserializer;

/**
 * A Java KafkaConsumer as a group peer in the interop tests (tests/integration/harness.py).
 *
 * <pre>java -cp CLASSPATH PeerConsumer TOPIC [consumer.property=value ...]</pre>
 *
 * The properties (bootstrap.servers, group.id, client.id, group.instance.id, ...) override the
 * defaults below: the classic protocol with CooperativeStickyAssignor, 6 s sessions, manual
 * commits. With group.protocol=consumer (KIP-848) the classic-only defaults (assignor, session
 * timeout, heartbeat interval: the broker owns them, and KafkaConsumer refuses them) are left
 * out. It polls until stdin says {"cmd":"stop"} or is closed, commits synchronously after
 * every non-empty poll, and writes one JSON object a line to stdout:
 * {"event":"assigned"|"revoked"|"lost","partitions":[[topic,p],...]} from its rebalance
 * listener, {"event":"records","ids":[...],"offsets":[[partition,offset],...]} with each
 * record's value and position, {"event":"commit_failed",
 * "error":...}, and {"event":"closed"} once close() (which revokes and leaves) has returned.
 */
public final class PeerConsumer {
    private static volatile boolean stopping = false;

    public static void main(String[] args) throws Exception {
        String topic = args[0];
        Properties props = new Properties();
        props.put(ConsumerConfig.PARTITION_ASSIGNMENT_STRATEGY_CONFIG, CooperativeStickyAssignor.class.getName());
        props.put(ConsumerConfig.SESSION_TIMEOUT_MS_CONFIG, "6000");
        props.put(ConsumerConfig.HEARTBEAT_INTERVAL_MS_CONFIG, "500");
        props.put(ConsumerConfig.MAX_POLL_INTERVAL_MS_CONFIG, "10000"); // the classic rebalance timeout
        props.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        props.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        props.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        props.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        for (int i = 1; i < args.length; i++) {
            if (args[i].startsWith("@")) { // a properties file (secrets stay out of argv)
                try (java.io.Reader in = java.nio.file.Files.newBufferedReader(java.nio.file.Path.of(args[i].substring(1)))) {
                    props.load(in);
                }
                continue;
            }
            String[] kv = args[i].split("=", 2);
            props.put(kv[0], kv[1]);
        }
        if ("consumer".equalsIgnoreCase(props.getProperty(ConsumerConfig.GROUP_PROTOCOL_CONFIG, "classic"))) {
            for (String classicOnly : List.of(
                    ConsumerConfig.PARTITION_ASSIGNMENT_STRATEGY_CONFIG,
                    ConsumerConfig.SESSION_TIMEOUT_MS_CONFIG,
                    ConsumerConfig.HEARTBEAT_INTERVAL_MS_CONFIG)) {
                boolean given = false;
                for (int i = 1; i < args.length; i++) {
                    given |= args[i].startsWith(classicOnly + "=");
                }
                if (!given) {
                    props.remove(classicOnly);
                }
            }
        }

        KafkaConsumer<String, String> consumer = new KafkaConsumer<>(props);
        Thread stdin = new Thread(() -> {
            try (BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8))) {
                String line;
                while ((line = in.readLine()) != null && !line.replace(" ", "").contains("\"cmd\":\"stop\"")) {
                    // nothing else is asked of this program
                }
            } catch (Exception e) {
                // stdin gone: stop as well
            }
            stopping = true;
            consumer.wakeup(); // the one KafkaConsumer method that is safe from another thread
        }, "stdin");
        stdin.setDaemon(true);
        stdin.start();

        consumer.subscribe(List.of(topic), new ConsumerRebalanceListener() {
            @Override
            public void onPartitionsAssigned(Collection<TopicPartition> partitions) {
                emit("assigned", partitions);
            }

            @Override
            public void onPartitionsRevoked(Collection<TopicPartition> partitions) {
                emit("revoked", partitions);
            }

            @Override
            public void onPartitionsLost(Collection<TopicPartition> partitions) {
                emit("lost", partitions);
            }
        });
        try {
            while (!stopping) {
                try {
                    ConsumerRecords<String, String> records = consumer.poll(Duration.ofMillis(100));
                    if (records.isEmpty()) {
                        continue;
                    }
                    List<String> ids = new ArrayList<>();
                    List<String> offsets = new ArrayList<>();
                    for (ConsumerRecord<String, String> record : records) {
                        ids.add(quote(record.value()));
                        offsets.add("[" + record.partition() + "," + record.offset() + "]");
                    }
                    print("{\"event\":\"records\",\"ids\":[" + String.join(",", ids)
                        + "],\"offsets\":[" + String.join(",", offsets) + "]}");
                    commit(consumer);
                } catch (WakeupException e) {
                    // stdin asked to stop: the loop condition says so
                }
            }
            commit(consumer); // what the last poll returned is printed: commit it too
        } finally {
            consumer.close();
            print("{\"event\":\"closed\"}");
        }
    }

    private static void commit(KafkaConsumer<String, String> consumer) {
        try {
            consumer.commitSync();
        } catch (WakeupException e) {
            stopping = true;
            commit(consumer); // a wakeup is used up once thrown: try again
        } catch (KafkaException e) { // e.g. a rebalance in progress: the next owner reads again
            print("{\"event\":\"commit_failed\",\"error\":" + quote(e.toString()) + "}");
        }
    }

    private static void emit(String event, Collection<TopicPartition> partitions) {
        List<String> pairs = new ArrayList<>();
        for (TopicPartition tp : partitions) {
            pairs.add("[" + quote(tp.topic()) + "," + tp.partition() + "]");
        }
        print("{\"event\":\"" + event + "\",\"partitions\":[" + String.join(",", pairs) + "]}");
    }

    private static String quote(String text) {
        StringBuilder out = new StringBuilder("\"");
        for (char c : text.toCharArray()) {
            if (c == '"' || c == '\\') {
                out.append('\\').append(c);
            } else if (c < 0x20) {
                out.append(String.format("\\u%04x", (int) c));
            } else {
                out.append(c);
            }
        }
        return out.append('"').toString();
    }

    private static synchronized void print(String line) {
        System.out.println(line);
        System.out.flush();
    }
}
