/*
 * A Kafka Streams 4.4.0 word count in a KIP-1071 streams group (group.protocol=streams): the
 * Java side of issue 29's Java + Python group (streamtasks/drills/kafka_streams_peer.py starts
 * it; docs/streams-groups.md, "Kafka Streams and streamtasks in one group", lists the names).
 *
 *   java ... WordCount <bootstrap> <application.id> <input topic> <output topic> <state dir> [<guarantee>]
 *
 * Topology (the names Kafka Streams derives, which a streamtasks App must use to share the group):
 *   subtopology 0: source <input> -> flatMapValues (lower-case words) -> groupBy word
 *                  -> sink <application.id>-words-by-word-repartition
 *   subtopology 1: source <application.id>-words-by-word-repartition -> count into the
 *                  in-memory store "word-counts" (changelog <application.id>-word-counts-changelog,
 *                  String keys, Long values) -> sink <output> (String word, Long count)
 *
 * exactly_once_v2 (unless the sixth argument names another processing.guarantee, at_least_once
 * on a streamtasks coordinator, which does not serve TxnOffsetCommit): every input record is
 * counted once, also across kills; the output and the changelog are read with read_committed. The store is in memory, so a task that moves to this
 * process is restored from its changelog. The state listener's transitions and the tasks this
 * process runs go to stdout, one line each ("STATE RUNNING", "TASKS active=[0_0, 1_1] standby=[]");
 * each changelog partition restored ("RESTORED wc-word-counts-changelog-2 37": records restored);
 * SIGTERM closes the instance (its member leaves the group), a line "CLOSED" then.
 */

import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.streams.KafkaStreams;
import org.apache.kafka.streams.StreamsBuilder;
import org.apache.kafka.streams.StreamsConfig;
import org.apache.kafka.streams.TaskMetadata;
import org.apache.kafka.streams.ThreadMetadata;
import org.apache.kafka.streams.Topology;
import org.apache.kafka.streams.errors.StreamsUncaughtExceptionHandler.StreamThreadExceptionResponse;
import org.apache.kafka.streams.kstream.Consumed;
import org.apache.kafka.streams.kstream.Grouped;
import org.apache.kafka.streams.kstream.Materialized;
import org.apache.kafka.streams.kstream.Produced;
import org.apache.kafka.streams.processor.StateRestoreListener;
import org.apache.kafka.streams.state.Stores;

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.Properties;
import java.util.TreeSet;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;

public final class WordCount {
    private WordCount() {}

    static Topology topology(String input, String output) {
        StreamsBuilder builder = new StreamsBuilder();
        builder.stream(input, Consumed.with(Serdes.String(), Serdes.String()))
                .flatMapValues(line -> {
                    List<String> words = new ArrayList<>();
                    for (String w : line.toLowerCase(Locale.ROOT).split("\\W+")) {
                        if (!w.isEmpty()) {
                            words.add(w);
                        }
                    }
                    return words;
                })
                .groupBy((key, word) -> word, Grouped.with("words-by-word", Serdes.String(), Serdes.String()))
                .count(Materialized.<String, Long>as(Stores.inMemoryKeyValueStore("word-counts"))
                        .withKeySerde(Serdes.String())
                        .withValueSerde(Serdes.Long()))
                .toStream()
                .to(output, Produced.with(Serdes.String(), Serdes.Long()));
        return builder.build();
    }

    private static synchronized void say(String line) {
        System.out.println(line);
        System.out.flush();
    }

    private static String tasks(KafkaStreams streams) {
        TreeSet<String> active = new TreeSet<>();
        TreeSet<String> standby = new TreeSet<>();
        for (ThreadMetadata thread : streams.metadataForLocalThreads()) {
            for (TaskMetadata t : thread.activeTasks()) {
                active.add(t.taskId().toString());
            }
            for (TaskMetadata t : thread.standbyTasks()) {
                standby.add(t.taskId().toString());
            }
        }
        return "TASKS active=" + active + " standby=" + standby;
    }

    public static void main(String[] args) throws InterruptedException {
        if (args.length != 5 && args.length != 6) {
            System.err.println(
                "usage: WordCount <bootstrap> <application.id> <input> <output> <state dir> [<processing.guarantee>]");
            System.exit(2);
        }
        Properties props = new Properties();
        props.put(StreamsConfig.BOOTSTRAP_SERVERS_CONFIG, args[0]);
        props.put(StreamsConfig.APPLICATION_ID_CONFIG, args[1]);
        props.put(StreamsConfig.STATE_DIR_CONFIG, args[4]);
        props.put(StreamsConfig.GROUP_PROTOCOL_CONFIG, "streams");
        props.put(
            StreamsConfig.PROCESSING_GUARANTEE_CONFIG, args.length == 6 ? args[5] : StreamsConfig.EXACTLY_ONCE_V2);
        props.put(StreamsConfig.COMMIT_INTERVAL_MS_CONFIG, 200);
        props.put(StreamsConfig.NUM_STREAM_THREADS_CONFIG, 1);
        props.put(StreamsConfig.STATESTORE_CACHE_MAX_BYTES_CONFIG, 0);
        props.put(StreamsConfig.consumerPrefix("auto.offset.reset"), "earliest");
        props.put(StreamsConfig.consumerPrefix("max.poll.records"), 50);

        KafkaStreams streams = new KafkaStreams(topology(args[2], args[3]), props);
        CountDownLatch closed = new CountDownLatch(1);
        streams.setStateListener((now, before) -> {
            say("STATE " + now);
            if (now == KafkaStreams.State.RUNNING) {
                say(tasks(streams));
            }
        });
        streams.setGlobalStateRestoreListener(new StateRestoreListener() {
            @Override
            public void onRestoreStart(TopicPartition partition, String store, long start, long end) {}

            @Override
            public void onBatchRestored(TopicPartition partition, String store, long end, long restored) {}

            @Override
            public void onRestoreEnd(TopicPartition partition, String store, long restored) {
                say("RESTORED " + partition + " " + restored);
            }
        });
        streams.setUncaughtExceptionHandler(exc -> {
            say("ERROR " + exc);
            return StreamThreadExceptionResponse.SHUTDOWN_CLIENT;
        });
        Runtime.getRuntime().addShutdownHook(new Thread(() -> {
            streams.close(Duration.ofSeconds(30));
            say("CLOSED");
            closed.countDown();
        }));
        say("DESCRIBE " + topology(args[2], args[3]).describe().toString().replace('\n', ' '));
        streams.start();
        String last = "";
        while (!closed.await(500, TimeUnit.MILLISECONDS)) {
            if (streams.state() == KafkaStreams.State.RUNNING) {
                String now = tasks(streams);
                if (!now.equals(last)) {
                    say(now);
                    last = now;
                }
            }
        }
    }
}
