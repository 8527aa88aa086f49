/*
 * The broker's streams-group task assignor as an oracle (tests/streams_group_oracle.py drives it):
 * Apache Kafka 4.4.0's org.apache.kafka.coordinator.group.streams.assignor.StickyTaskAssignor
 * (the group coordinator's "sticky", the default assignor of KIP-1071 streams groups), run on
 * the GroupSpec the coordinator would build. Compiled against the embedded broker's jars
 * (kafka-group-coordinator 4.4.0 and its API jar, jackson-databind).
 *
 * stdin, one JSON request: {"scenarios": [SCENARIO, ...]}
 *
 *   SCENARIO = {"num_standby_replicas": 1, "rack_aware_assignment_tags": ["zone"],
 *               "subtopologies": [{"id": "0", "partitions": 4, "stateful": true}, ...],
 *               "members": [{"id": "m1", "process_id": "p1", "client_tags": {"zone": "a"},
 *                            "active": {"0": [0, 1]}, "standby": {"0": [2]},
 *                            "task_offsets": {"0": {"2": 12345}}}, ...]}
 *
 * stdout, one JSON answer: {"results": [RESULT, ...]}
 *
 *   RESULT = {"members": {"m1": {"active": {"0": [0, 1]}, "standby": {...}}}, "assign_ns": n}
 *            or {"error": "<the exception>"} where the assignor threw.
 *
 * A member is one stream thread: a process with two threads is two members with one process id.
 */

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;

import org.apache.kafka.coordinator.group.api.streams.assignor.GroupAssignment;
import org.apache.kafka.coordinator.group.api.streams.assignor.MemberAssignment;
import org.apache.kafka.coordinator.group.api.streams.assignor.TopologyDescriber;
import org.apache.kafka.coordinator.group.streams.assignor.AssignmentConfigsImpl;
import org.apache.kafka.coordinator.group.streams.assignor.GroupSpecImpl;
import org.apache.kafka.coordinator.group.streams.assignor.MemberMetadataAndStateImpl;
import org.apache.kafka.coordinator.group.streams.assignor.StickyTaskAssignor;

import java.io.IOException;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.NoSuchElementException;
import java.util.Optional;
import java.util.Set;
import java.util.TreeMap;
import java.util.TreeSet;

public final class StreamsGroupOracle {
    private StreamsGroupOracle() {}

    private static final ObjectMapper JSON = new ObjectMapper();

    private record Describer(List<String> ids, Map<String, Integer> partitions, Set<String> stateful)
            implements TopologyDescriber {
        @Override
        public List<String> subtopologies() {
            return ids;
        }

        @Override
        public int maxNumInputPartitions(String subtopologyId) {
            Integer n = partitions.get(subtopologyId);
            if (n == null) {
                throw new NoSuchElementException(subtopologyId);
            }
            return n;
        }

        @Override
        public boolean isStateful(String subtopologyId) {
            return stateful.contains(subtopologyId);
        }
    }

    private static Map<String, Set<Integer>> tasks(JsonNode node) {
        Map<String, Set<Integer>> out = new HashMap<>();
        if (node == null) {
            return out;
        }
        for (Map.Entry<String, JsonNode> e : node.properties()) {
            Set<Integer> parts = new TreeSet<>();
            e.getValue().forEach(p -> parts.add(p.asInt()));
            out.put(e.getKey(), parts);
        }
        return out;
    }

    private static Map<String, Map<Integer, Long>> offsets(JsonNode node) {
        Map<String, Map<Integer, Long>> out = new HashMap<>();
        if (node == null) {
            return out;
        }
        for (Map.Entry<String, JsonNode> e : node.properties()) {
            Map<Integer, Long> byPartition = new HashMap<>();
            for (Map.Entry<String, JsonNode> entry : e.getValue().properties()) {
                byPartition.put(Integer.parseInt(entry.getKey()), entry.getValue().asLong());
            }
            out.put(e.getKey(), byPartition);
        }
        return out;
    }

    private static ObjectNode taskJson(Map<String, Set<Integer>> tasks) {
        ObjectNode out = JSON.createObjectNode();
        for (Map.Entry<String, Set<Integer>> e : new TreeMap<>(tasks).entrySet()) {
            ArrayNode parts = out.putArray(e.getKey());
            new TreeSet<>(e.getValue()).forEach(parts::add);
        }
        return out;
    }

    private static ObjectNode run(JsonNode scenario) {
        List<String> ids = new ArrayList<>();
        Map<String, Integer> partitions = new HashMap<>();
        Set<String> stateful = new TreeSet<>();
        for (JsonNode s : scenario.get("subtopologies")) {
            String id = s.get("id").asText();
            ids.add(id);
            partitions.put(id, s.get("partitions").asInt());
            if (s.get("stateful").asBoolean()) {
                stateful.add(id);
            }
        }
        List<String> tags = new ArrayList<>();
        JsonNode tagNode = scenario.get("rack_aware_assignment_tags");
        if (tagNode != null) {
            tagNode.forEach(t -> tags.add(t.asText()));
        }
        Map<String, MemberMetadataAndStateImpl> members = new HashMap<>();
        for (JsonNode m : scenario.get("members")) {
            Map<String, String> clientTags = new HashMap<>();
            JsonNode ct = m.get("client_tags");
            if (ct != null) {
                for (Map.Entry<String, JsonNode> e : ct.properties()) {
                    clientTags.put(e.getKey(), e.getValue().asText());
                }
            }
            members.put(m.get("id").asText(), new MemberMetadataAndStateImpl(
                    Optional.empty(), Optional.empty(), m.get("process_id").asText(), clientTags,
                    tasks(m.get("active")), tasks(m.get("standby")), tasks(m.get("warmup")),
                    offsets(m.get("task_offsets")), offsets(m.get("task_end_offsets"))));
        }
        AssignmentConfigsImpl configs = new AssignmentConfigsImpl(scenario.get("num_standby_replicas").asInt(), tags);
        ObjectNode result = JSON.createObjectNode();
        try {
            long start = System.nanoTime();
            GroupAssignment assignment = new StickyTaskAssignor().assign(
                    new GroupSpecImpl(members, configs), new Describer(ids, partitions, stateful));
            long elapsed = System.nanoTime() - start;
            ObjectNode out = result.putObject("members");
            for (Map.Entry<String, MemberAssignment> e : new TreeMap<>(assignment.members()).entrySet()) {
                ObjectNode member = out.putObject(e.getKey());
                member.set("active", taskJson(e.getValue().activeTasks()));
                member.set("standby", taskJson(e.getValue().standbyTasks()));
            }
            result.put("assign_ns", elapsed);
        } catch (RuntimeException exc) {
            result.put("error", exc.toString());
        }
        return result;
    }

    public static void main(String[] args) throws IOException {
        JsonNode request = JSON.readTree(System.in);
        ObjectNode answer = JSON.createObjectNode();
        ArrayNode results = answer.putArray("results");
        for (JsonNode scenario : request.get("scenarios")) {
            results.add(run(scenario));
        }
        JSON.writeValue(System.out, answer);
    }
}
