/*
 * The Java side of the streams-group codec check (tests/protocol/test_streams_group_java.py):
 * kafka-clients' generated StreamsGroup{Heartbeat,Describe}{Request,Response}Data, reading and
 * writing the same messages streamtasks encodes.
 *
 * stdin: one JSON object a line, {"message": "heartbeat_request" | "heartbeat_response" |
 * "describe_request" | "describe_response", "version": n, "hex": bytes streamtasks wrote,
 * "json": the message in Kafka's JSON form (the generated *JsonConverter's field names)}.
 * stdout: one JSON object a line, {"from_json": hex of the message read from "json" and
 * serialized by Kafka, "reencoded": hex of "hex" parsed and serialized again by Kafka,
 * "equal": whether both parsed messages are equal} or {"error": "..."}.
 */

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.util.HexFormat;
import org.apache.kafka.common.message.StreamsGroupDescribeRequestData;
import org.apache.kafka.common.message.StreamsGroupDescribeRequestDataJsonConverter;
import org.apache.kafka.common.message.StreamsGroupDescribeResponseData;
import org.apache.kafka.common.message.StreamsGroupDescribeResponseDataJsonConverter;
import org.apache.kafka.common.message.StreamsGroupHeartbeatRequestData;
import org.apache.kafka.common.message.StreamsGroupHeartbeatRequestDataJsonConverter;
import org.apache.kafka.common.message.StreamsGroupHeartbeatResponseData;
import org.apache.kafka.common.message.StreamsGroupHeartbeatResponseDataJsonConverter;
import org.apache.kafka.common.protocol.ApiMessage;
import org.apache.kafka.common.protocol.ByteBufferAccessor;
import org.apache.kafka.common.protocol.MessageUtil;

public final class StreamsCodec {
    private StreamsCodec() {}

    private static ApiMessage fromJson(String kind, JsonNode json, short version) {
        switch (kind) {
            case "heartbeat_request": return StreamsGroupHeartbeatRequestDataJsonConverter.read(json, version);
            case "heartbeat_response": return StreamsGroupHeartbeatResponseDataJsonConverter.read(json, version);
            case "describe_request": return StreamsGroupDescribeRequestDataJsonConverter.read(json, version);
            case "describe_response": return StreamsGroupDescribeResponseDataJsonConverter.read(json, version);
            default: throw new IllegalArgumentException("unknown message " + kind);
        }
    }

    private static ApiMessage fromBytes(String kind, byte[] bytes, short version) {
        ByteBufferAccessor in = new ByteBufferAccessor(ByteBuffer.wrap(bytes));
        switch (kind) {
            case "heartbeat_request": return new StreamsGroupHeartbeatRequestData(in, version);
            case "heartbeat_response": return new StreamsGroupHeartbeatResponseData(in, version);
            case "describe_request": return new StreamsGroupDescribeRequestData(in, version);
            case "describe_response": return new StreamsGroupDescribeResponseData(in, version);
            default: throw new IllegalArgumentException("unknown message " + kind);
        }
    }

    private static String hex(ApiMessage message, short version) {
        ByteBuffer buffer = MessageUtil.toByteBufferAccessor(message, version).buffer();
        return HexFormat.of().formatHex(MessageUtil.byteBufferToArray(buffer));
    }

    public static void main(String[] args) throws Exception {
        ObjectMapper mapper = new ObjectMapper();
        PrintStream out = new PrintStream(System.out, false, StandardCharsets.UTF_8);
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        String line;
        while ((line = in.readLine()) != null) {
            ObjectNode answer = mapper.createObjectNode();
            try {
                JsonNode request = mapper.readTree(line);
                String kind = request.get("message").asText();
                short version = (short) request.get("version").asInt();
                ApiMessage viaJson = fromJson(kind, request.get("json"), version);
                ApiMessage viaBytes = fromBytes(kind, HexFormat.of().parseHex(request.get("hex").asText()), version);
                answer.put("from_json", hex(viaJson, version));
                answer.put("reencoded", hex(viaBytes, version));
                answer.put("equal", viaJson.equals(viaBytes));
            } catch (Exception e) {
                answer.put("error", e.toString());
            }
            out.println(mapper.writeValueAsString(answer));
            out.flush();
        }
    }
}
