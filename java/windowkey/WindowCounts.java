/*
 * A Kafka Streams app with a persistent window store, for streamtasks' window store interop test:
 * counts the records of each key per 1-minute window (String keys, Long counts) in the store
 * "counts" (retention 10 minutes, no duplicates, caching off so every update is changelogged),
 * then stops once it has processed the number of records given.
 *
 * Usage: WindowCounts <bootstrap> <application id> <source topic> <records> <state dir>
 */
import java.time.Duration;
import java.util.Properties;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;

import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.streams.KafkaStreams;
import org.apache.kafka.streams.StreamsConfig;
import org.apache.kafka.streams.Topology;
import org.apache.kafka.streams.processor.api.Processor;
import org.apache.kafka.streams.processor.api.ProcessorContext;
import org.apache.kafka.streams.processor.api.Record;
import org.apache.kafka.streams.state.Stores;
import org.apache.kafka.streams.state.WindowStore;

public final class WindowCounts {
    private static final long WINDOW_MS = 60_000L;

    private WindowCounts() {
    }

    public static void main(final String[] args) throws Exception {
        final String bootstrap = args[0];
        final String applicationId = args[1];
        final String source = args[2];
        final long records = Long.parseLong(args[3]);
        final String stateDir = args[4];
        final AtomicLong processed = new AtomicLong();
        final CountDownLatch done = new CountDownLatch(1);

        final Topology topology = new Topology();
        topology.addSource("source", Serdes.String().deserializer(), Serdes.String().deserializer(), source);
        topology.addProcessor("count", () -> new Processor<String, String, Void, Void>() {
            private WindowStore<String, Long> counts;

            @Override
            public void init(final ProcessorContext<Void, Void> context) {
                counts = context.getStateStore("counts");
            }

            @Override
            public void process(final Record<String, String> record) {
                final long start = record.timestamp() - record.timestamp() % WINDOW_MS;
                final Long before = counts.fetch(record.key(), start);
                counts.put(record.key(), before == null ? 1L : before + 1L, start);
                if (processed.incrementAndGet() >= records) {
                    done.countDown();
                }
            }
        }, "source");
        topology.addStateStore(
            Stores.windowStoreBuilder(
                Stores.persistentWindowStore("counts", Duration.ofMinutes(10), Duration.ofMillis(WINDOW_MS), false),
                Serdes.String(),
                Serdes.Long()).withCachingDisabled(),
            "count");

        final Properties props = new Properties();
        props.put(StreamsConfig.APPLICATION_ID_CONFIG, applicationId);
        props.put(StreamsConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        props.put(StreamsConfig.STATE_DIR_CONFIG, stateDir);
        props.put(StreamsConfig.COMMIT_INTERVAL_MS_CONFIG, 200);
        props.put(StreamsConfig.consumerPrefix("auto.offset.reset"), "earliest");
        try (KafkaStreams streams = new KafkaStreams(topology, props)) {
            streams.start();
            if (!done.await(120, TimeUnit.SECONDS)) {
                System.err.println("processed " + processed.get() + " of " + records + " in 120 s");
                System.exit(2);
            }
            streams.close(Duration.ofSeconds(30));
        }
        System.out.println("processed " + processed.get());
    }
}
