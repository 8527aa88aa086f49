/*
 * Kafka's own assignors as oracles for streamtasks' assignors (tests/oracle.py drives it).
 *
 * Reads one JSON request on stdin and writes one JSON answer on stdout:
 *
 *   {"warmup": 2, "repeat": 3, "scenarios": [SCENARIO, ...]}
 *   -> {"kafka_streams": "kafka-streams-4.4.0.jar", "kafka_clients": "kafka-clients-4.4.0.jar",
 *       "results": [RESULT, ...]}
 *
 * A "task" scenario runs Kafka Streams' HighAvailabilityTaskAssignor (the assignor Kafka
 * Streams uses unless task.assignor.class names another; KIP-924's public package has only a
 * StickyTaskAssignor) on ClientStates built with the constructor Kafka's own tests use:
 *
 *   {"kind": "task", "tasks": [[subtopology, partition, stateful], ...],
 *    "configs": {"num_standby_replicas": 1, "acceptable_recovery_lag": 10000,
 *                "max_warmup_replicas": 2, "probing_rebalance_interval_ms": 600000,
 *                "rack_aware_assignment_tags": ["zone"],
 *                "rack_aware_assignment_strategy": "min_traffic",
 *                "rack_aware_assignment_traffic_cost": null, "rack_aware_assignment_non_overlap_cost": null},
 *    "missing_lag": 9223372036854775807,
 *    "sources": [[["topic", partition], ...], ...],            (per task; with a strategy only)
 *    "partition_racks": [["topic", partition, ["rack", ...]], ...],            (the same)
 *    "clients": [{"id": "<uuid>", "capacity": 2, "tags": {"zone": "a"}, "rack": "r1",
 *                 "active": [task index, ...], "standby": [task index, ...],
 *                 "lags": [[task index, lag], ...]}, ...]}
 *   -> {"clients": [{"id": "<uuid>", "active": [task index, ...], "standby": [...]}, ...],
 *       "followup": true, "rack_aware": false, "assign_ns": [...]}
 *   ("rack_aware": whether the RackAwareTaskAssignor could run: racks everywhere, a strategy)
 *
 * Kafka Streams knows a lag for every stateful task on every client (ClientState.computeTaskLags
 * fills the tasks a client has no offset sum for with the task's whole end offset sum), so each
 * client gets a full TreeMap of lags: "lags" and, for the other stateful tasks, "missing_lag".
 * Warm-ups are standbys in Kafka Streams' answer (its assign() tracks them only inside).
 *
 * With a rack-aware strategy (KIP-925) the RackAwareTaskAssignor gets a Cluster with one broker
 * per rack named in "partition_racks", each partition's replicas on its racks' brokers, each
 * task's input partitions, and each client's rack (as its one consumer's). Its standby
 * optimisation weighs the changelogs' racks, which Kafka Streams describes through its
 * InternalTopicManager: here one that answers from the scenario (no broker), with
 *
 *    "changelogs": [[["topic", partition], ...], ...],                (per task; [] if none)
 *    "changelog_racks": [["topic", partition, ["rack", ...]], ...]
 *
 * A "partition" scenario runs kafka-clients' CooperativeStickyAssignor:
 *
 *   {"kind": "partition", "topics": {"t0": 12, ...},
 *    "members": [{"id": "m0", "topics": ["t0"], "owned": [["t0", 3], ...], "generation": 4}]}
 *   -> {"members": {"m0": [["t0", 3], ...]}, "target": {"m0": [...]}, "assign_ns": [...]}
 *
 * "members" is what the assignor hands out this round (partitions that change owner withheld,
 * KIP-429); "target" is the assignment after the follow-up rebalance (see TargetAssignor).
 *
 * A scenario the assignor throws on gets {"kind": ..., "error": "<the exception>"} instead.
 *
 * "assign_ns" holds the System.nanoTime() around the assign call alone, once per timed run,
 * after "warmup" untimed runs on the same input (every run gets fresh ClientStates and a fresh
 * assignor: both are mutated by assign).
 */

import com.fasterxml.jackson.core.JsonEncoding;
import com.fasterxml.jackson.core.JsonGenerator;
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;

import org.apache.kafka.clients.consumer.ConsumerPartitionAssignor.Subscription;
import org.apache.kafka.clients.consumer.CooperativeStickyAssignor;
import org.apache.kafka.clients.consumer.internals.AbstractStickyAssignor;
import org.apache.kafka.common.Cluster;
import org.apache.kafka.common.Node;
import org.apache.kafka.common.PartitionInfo;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.TopicPartitionInfo;
import org.apache.kafka.common.utils.Time;
import org.apache.kafka.streams.StreamsConfig;
import org.apache.kafka.streams.processor.TaskId;
import org.apache.kafka.streams.processor.assignment.AssignmentConfigs;
import org.apache.kafka.streams.processor.assignment.ProcessId;
import org.apache.kafka.streams.processor.internals.InternalTopicManager;
import org.apache.kafka.streams.processor.internals.TopologyMetadata.Subtopology;
import org.apache.kafka.streams.processor.internals.assignment.ClientState;
import org.apache.kafka.streams.processor.internals.assignment.HighAvailabilityTaskAssignor;
import org.apache.kafka.streams.processor.internals.assignment.RackAwareTaskAssignor;

import java.io.IOException;
import java.io.OutputStream;
import java.io.PrintStream;
import java.util.ArrayList;
import java.util.Collections;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.OptionalInt;
import java.util.Set;
import java.util.TreeMap;
import java.util.TreeSet;
import java.util.UUID;

public final class Oracle {
    private Oracle() {}

    public static void main(final String[] args) throws IOException {
        final PrintStream out = System.out;
        System.setOut(System.err); // nothing but the answer on stdout
        final ObjectMapper mapper = new ObjectMapper();
        final JsonNode request = mapper.readTree(System.in);
        final int warmup = request.path("warmup").asInt(0);
        final int repeat = Math.max(1, request.path("repeat").asInt(1));
        try (JsonGenerator json = mapper.getFactory().createGenerator((OutputStream) out, JsonEncoding.UTF8)) {
            json.writeStartObject();
            json.writeStringField("kafka_streams", jar(HighAvailabilityTaskAssignor.class));
            json.writeStringField("kafka_clients", jar(CooperativeStickyAssignor.class));
            json.writeArrayFieldStart("results");
            for (final JsonNode scenario : request.path("scenarios")) {
                final String kind = scenario.path("kind").asText();
                try {
                    if ("task".equals(kind)) {
                        new TaskScenario(scenario).run(json, warmup, repeat);
                    } else if ("partition".equals(kind)) {
                        new PartitionScenario(scenario).run(json, warmup, repeat);
                    } else {
                        throw new IllegalArgumentException("unknown scenario kind: " + kind);
                    }
                } catch (final RuntimeException e) {
                    // The assignor (or the input) failed on this scenario alone: say so, go on.
                    json.writeStartObject();
                    json.writeStringField("kind", kind);
                    json.writeStringField("error", e.toString());
                    json.writeEndObject();
                }
                json.flush();
            }
            json.writeEndArray();
            json.writeEndObject();
        }
        out.flush();
    }

    /** The file name of the jar a class was loaded from (kafka-streams' jar names no version inside). */
    private static String jar(final Class<?> type) {
        final String path = type.getProtectionDomain().getCodeSource().getLocation().getPath();
        return path.substring(path.lastIndexOf('/') + 1);
    }

    private static void writeTimes(final JsonGenerator json, final long[] times) throws IOException {
        json.writeArrayFieldStart("assign_ns");
        for (final long t : times) {
            json.writeNumber(t);
        }
        json.writeEndArray();
    }

    /** HighAvailabilityTaskAssignor on one application. */
    private static final class TaskScenario {
        private final List<TaskId> tasks = new ArrayList<>();
        private final Map<TaskId, Integer> index = new HashMap<>();
        private final Set<TaskId> allTasks = new HashSet<>();
        private final Set<TaskId> statefulTasks = new HashSet<>();
        private final List<ProcessId> ids = new ArrayList<>();
        private final List<Set<TaskId>> previousActive = new ArrayList<>();
        private final List<Set<TaskId>> previousStandby = new ArrayList<>();
        private final List<Map<TaskId, Long>> lags = new ArrayList<>();
        private final List<Map<String, String>> tags = new ArrayList<>();
        private final List<Integer> capacities = new ArrayList<>();
        private final List<String> racks = new ArrayList<>();
        private final Map<TaskId, Set<TopicPartition>> sources = new HashMap<>();
        private final Map<TaskId, Set<TopicPartition>> changelogs = new HashMap<>();
        private final Map<String, List<TopicPartitionInfo>> changelogInfo = new HashMap<>();
        private final Map<Subtopology, Set<TaskId>> subtopologies = new HashMap<>();
        private final AssignmentConfigs configs;
        private final String strategy;
        private Cluster cluster = Cluster.empty();

        TaskScenario(final JsonNode scenario) {
            for (final JsonNode t : scenario.path("tasks")) {
                final TaskId task = new TaskId(t.get(0).asInt(), t.get(1).asInt());
                index.put(task, tasks.size());
                tasks.add(task);
                allTasks.add(task);
                if (t.get(2).asBoolean()) {
                    statefulTasks.add(task);
                }
            }
            final JsonNode c = scenario.path("configs");
            final List<String> tagKeys = new ArrayList<>();
            c.path("rack_aware_assignment_tags").forEach(k -> tagKeys.add(k.asText()));
            strategy = c.path("rack_aware_assignment_strategy").asText(StreamsConfig.RACK_AWARE_ASSIGNMENT_STRATEGY_NONE);
            configs = new AssignmentConfigs(
                c.path("acceptable_recovery_lag").asLong(10_000L),
                c.path("max_warmup_replicas").asInt(2),
                c.path("num_standby_replicas").asInt(0),
                c.path("probing_rebalance_interval_ms").asLong(600_000L),
                tagKeys,
                optionalInt(c.path("rack_aware_assignment_traffic_cost")),
                optionalInt(c.path("rack_aware_assignment_non_overlap_cost")),
                strategy
            );
            readRacks(scenario);
            final Long missing = scenario.path("missing_lag").asLong(Long.MAX_VALUE);
            for (final JsonNode client : scenario.path("clients")) {
                ids.add(new ProcessId(UUID.fromString(client.path("id").asText())));
                capacities.add(client.path("capacity").asInt(1));
                racks.add(client.path("rack").isTextual() ? client.path("rack").asText() : null);
                previousActive.add(taskSet(client.path("active")));
                previousStandby.add(taskSet(client.path("standby")));
                final Map<TaskId, Long> lag = new TreeMap<>();
                for (final TaskId task : statefulTasks) {
                    lag.put(task, missing);
                }
                for (final JsonNode entry : client.path("lags")) {
                    final TaskId task = tasks.get(entry.get(0).asInt());
                    if (statefulTasks.contains(task)) {
                        lag.put(task, entry.get(1).asLong());
                    }
                }
                lags.add(Collections.unmodifiableMap(lag));
                final Map<String, String> clientTags = new TreeMap<>();
                client.path("tags").properties().forEach(e -> clientTags.put(e.getKey(), e.getValue().asText()));
                tags.add(clientTags);
            }
        }

        private Set<TaskId> taskSet(final JsonNode indexes) {
            final Set<TaskId> set = new TreeSet<>();
            for (final JsonNode i : indexes) {
                set.add(tasks.get(i.asInt()));
            }
            return set;
        }

        private Map<ProcessId, ClientState> clients() {
            final Map<ProcessId, ClientState> clients = new TreeMap<>();
            for (int i = 0; i < ids.size(); i++) {
                clients.put(ids.get(i), new ClientState(
                    previousActive.get(i), previousStandby.get(i), lags.get(i), tags.get(i), capacities.get(i), ids.get(i)
                ));
            }
            return clients;
        }

        private static OptionalInt optionalInt(final JsonNode value) {
            return value.isInt() ? OptionalInt.of(value.asInt()) : OptionalInt.empty();
        }

        /** KIP-925's inputs: the tasks' input partitions and a Cluster holding their racks. */
        private void readRacks(final JsonNode scenario) {
            final JsonNode perTask = scenario.path("sources");
            for (int i = 0; i < perTask.size(); i++) {
                final TaskId task = tasks.get(i);
                final Set<TopicPartition> set = new HashSet<>();
                perTask.get(i).forEach(tp -> set.add(new TopicPartition(tp.get(0).asText(), tp.get(1).asInt())));
                sources.put(task, set);
                subtopologies.computeIfAbsent(new Subtopology(task.subtopology(), null), k -> new HashSet<>()).add(task);
            }
            final Map<String, Node> brokers = new TreeMap<>();
            final List<PartitionInfo> partitions = new ArrayList<>();
            for (final JsonNode entry : scenario.path("partition_racks")) {
                final List<Node> replicas = new ArrayList<>();
                for (final JsonNode rack : entry.get(2)) {
                    replicas.add(brokers.computeIfAbsent(rack.asText(),
                        r -> new Node(brokers.size(), "broker-" + r, 9092, r)));
                }
                final Node[] nodes = replicas.toArray(new Node[0]);
                partitions.add(new PartitionInfo(entry.get(0).asText(), entry.get(1).asInt(),
                    nodes.length > 0 ? nodes[0] : null, nodes, nodes));
            }
            cluster = new Cluster("oracle", brokers.values(), partitions, Set.of(), Set.of());
            final JsonNode perTaskChangelogs = scenario.path("changelogs");
            for (int i = 0; i < perTaskChangelogs.size(); i++) {
                final Set<TopicPartition> set = new HashSet<>();
                perTaskChangelogs.get(i).forEach(tp -> set.add(new TopicPartition(tp.get(0).asText(), tp.get(1).asInt())));
                if (!set.isEmpty()) {
                    changelogs.put(tasks.get(i), set);
                }
            }
            for (final JsonNode entry : scenario.path("changelog_racks")) {
                final List<Node> replicas = new ArrayList<>();
                for (final JsonNode rack : entry.get(2)) {
                    replicas.add(brokers.computeIfAbsent(rack.asText(),
                        r -> new Node(brokers.size(), "broker-" + r, 9092, r)));
                }
                changelogInfo.computeIfAbsent(entry.get(0).asText(), t -> new ArrayList<>()).add(
                    new TopicPartitionInfo(entry.get(1).asInt(), replicas.isEmpty() ? null : replicas.get(0), replicas, replicas));
            }
        }

        /** Kafka Streams' InternalTopicManager describing the changelogs from the scenario. */
        private static final class DescribedTopics extends InternalTopicManager {
            private final Map<String, List<TopicPartitionInfo>> info;

            DescribedTopics(final Map<String, List<TopicPartitionInfo>> info) {
                super(Time.SYSTEM, null, new StreamsConfig(Map.of(
                    StreamsConfig.APPLICATION_ID_CONFIG, "oracle",
                    StreamsConfig.BOOTSTRAP_SERVERS_CONFIG, "localhost:9092")));
                this.info = info;
            }

            @Override
            public Map<String, List<TopicPartitionInfo>> getTopicPartitionInfo(final Set<String> topics) {
                final Map<String, List<TopicPartitionInfo>> out = new HashMap<>();
                for (final String topic : topics) {
                    if (info.containsKey(topic)) {
                        out.put(topic, info.get(topic));
                    }
                }
                return out;
            }
        }

        private RackAwareTaskAssignor racks() {
            if (StreamsConfig.RACK_AWARE_ASSIGNMENT_STRATEGY_NONE.equals(strategy)) {
                // canEnableRackAwareAssignor() is false, the rack optimisation is off.
                return new RackAwareTaskAssignor(
                    null, Map.of(), Map.of(), Map.of(), Map.of(), null, configs, Time.SYSTEM
                );
            }
            final Map<ProcessId, Map<String, Optional<String>>> consumers = new HashMap<>();
            for (int i = 0; i < ids.size(); i++) {
                consumers.put(ids.get(i), Map.of("consumer-" + i, Optional.ofNullable(racks.get(i))));
            }
            return new RackAwareTaskAssignor(
                cluster, sources, changelogs, subtopologies, consumers, new DescribedTopics(changelogInfo), configs, Time.SYSTEM
            );
        }

        void run(final JsonGenerator json, final int warmup, final int repeat) throws IOException {
            final long[] times = new long[repeat];
            Map<ProcessId, ClientState> clients = null;
            boolean followup = false;
            boolean rackAware = false;
            for (int r = -warmup; r < repeat; r++) {
                clients = clients();
                final HighAvailabilityTaskAssignor assignor = new HighAvailabilityTaskAssignor();
                final RackAwareTaskAssignor racks = racks();
                final long start = System.nanoTime();
                followup = assignor.assign(clients, allTasks, statefulTasks, racks, configs);
                final long took = System.nanoTime() - start;
                rackAware = racks.canEnableRackAwareAssignor();
                if (r >= 0) {
                    times[r] = took;
                }
            }
            json.writeStartObject();
            json.writeStringField("kind", "task");
            json.writeArrayFieldStart("clients");
            for (final Map.Entry<ProcessId, ClientState> entry : clients.entrySet()) {
                json.writeStartObject();
                json.writeStringField("id", entry.getKey().id().toString());
                writeTasks(json, "active", entry.getValue().activeTasks());
                writeTasks(json, "standby", entry.getValue().standbyTasks());
                json.writeEndObject();
            }
            json.writeEndArray();
            json.writeBooleanField("followup", followup);
            json.writeBooleanField("rack_aware", rackAware);
            writeTimes(json, times);
            json.writeEndObject();
        }

        private void writeTasks(final JsonGenerator json, final String field, final Set<TaskId> set) throws IOException {
            json.writeArrayFieldStart(field);
            for (final TaskId task : new TreeSet<>(set)) {
                json.writeNumber(index.get(task));
            }
            json.writeEndArray();
        }
    }

    /** CooperativeStickyAssignor on one consumer group. */
    private static final class PartitionScenario {
        private final Map<String, Integer> partitionsPerTopic = new HashMap<>();
        private final Map<String, Subscription> subscriptions = new HashMap<>();
        private final List<String> memberIds = new ArrayList<>();

        PartitionScenario(final JsonNode scenario) {
            scenario.path("topics").properties().forEach(e -> partitionsPerTopic.put(e.getKey(), e.getValue().asInt()));
            for (final JsonNode member : scenario.path("members")) {
                final String id = member.path("id").asText();
                final List<String> topics = new ArrayList<>();
                member.path("topics").forEach(t -> topics.add(t.asText()));
                final List<TopicPartition> owned = new ArrayList<>();
                member.path("owned").forEach(tp -> owned.add(new TopicPartition(tp.get(0).asText(), tp.get(1).asInt())));
                final int generation = member.path("generation").asInt(-1);
                memberIds.add(id);
                subscriptions.put(id, new Subscription(topics, null, owned, generation, Optional.empty()));
            }
        }

        void run(final JsonGenerator json, final int warmup, final int repeat) throws IOException {
            final long[] times = new long[repeat];
            Map<String, List<TopicPartition>> result = null;
            for (int r = -warmup; r < repeat; r++) {
                final CooperativeStickyAssignor assignor = new CooperativeStickyAssignor();
                final long start = System.nanoTime();
                result = assignor.assign(partitionsPerTopic, subscriptions);
                final long took = System.nanoTime() - start;
                if (r >= 0) {
                    times[r] = took;
                }
            }
            final Map<String, List<TopicPartition>> target = new TargetAssignor().assign(partitionsPerTopic, subscriptions);
            for (final String member : memberIds) {
                final List<TopicPartition> handed = result.getOrDefault(member, List.of());
                if (!new HashSet<>(target.getOrDefault(member, List.of())).containsAll(handed)) {
                    throw new IllegalStateException("member " + member + " got partitions outside its target");
                }
            }
            json.writeStartObject();
            json.writeStringField("kind", "partition");
            writeMembers(json, "members", result);
            writeMembers(json, "target", target);
            writeTimes(json, times);
            json.writeEndObject();
        }

        private void writeMembers(final JsonGenerator json, final String field,
                                  final Map<String, List<TopicPartition>> assignment) throws IOException {
            json.writeObjectFieldStart(field);
            for (final String member : new TreeSet<>(memberIds)) {
                json.writeArrayFieldStart(member);
                for (final TopicPartition tp : assignment.getOrDefault(member, List.of())) {
                    json.writeStartArray();
                    json.writeString(tp.topic());
                    json.writeNumber(tp.partition());
                    json.writeEndArray();
                }
                json.writeEndArray();
            }
            json.writeEndObject();
        }
    }

    /**
     * The target of CooperativeStickyAssignor: its sticky assignment before KIP-429's adjustment
     * withholds the partitions that change owner. CooperativeStickyAssignor returns only the
     * adjusted assignment (and keeps the withheld partitions' new owners only on one of its two
     * paths), so this runs the same AbstractStickyAssignor with CooperativeStickyAssignor's
     * reading of a subscription: the consumer protocol's own generation field, no generation
     * when it is absent (the oracle's subscriptions carry no user data).
     */
    private static final class TargetAssignor extends AbstractStickyAssignor {
        @Override
        public String name() {
            return "cooperative-sticky-target";
        }

        @Override
        protected MemberData memberData(final Subscription subscription) {
            return new MemberData(subscription.ownedPartitions(), subscription.generationId(), subscription.rackId());
        }
    }
}
