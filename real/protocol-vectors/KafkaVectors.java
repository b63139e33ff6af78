// Kafka's own serialization as an oracle for kafkasim's protocol codec (tests/unit/test_protocol_*).
//
// Compile and run against the reference jars (real/maven/lib, see real/maven/pom.xml):
//   javac -d out -cp 'real/maven/lib/*' real/protocol-vectors/KafkaVectors.java
//   java -cp 'out:real/maven/lib/*' KafkaVectors
//
// Line protocol on stdin/stdout, one request per line, fields separated by TAB:
//   E <java class> <version> <json>   -> "OK <hex>"  Kafka's bytes for the message that
//                                        <class>JsonConverter.read(json, version) builds
//   D <java class> <version> <hex>    -> "OK <hex>\t<json>"  Kafka decodes the bytes, then
//                                        re-serializes them and writes them as JSON
//   N <java class> <version>          -> "OK <hex>"  Kafka's bytes for `new <class>()` (defaults)
//   anything that throws              -> "ERR <exception class>: <message>"
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.lang.reflect.InvocationTargetException;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import org.apache.kafka.common.protocol.ByteBufferAccessor;
import org.apache.kafka.common.protocol.Message;
import org.apache.kafka.common.protocol.MessageUtil;
import org.apache.kafka.common.protocol.Readable;

public class KafkaVectors {
    private static final ObjectMapper MAPPER = new ObjectMapper();

    public static void main(String[] args) throws Exception {
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        PrintStream out = new PrintStream(System.out, false, "UTF-8");
        String line;
        while ((line = in.readLine()) != null) {
            if (line.isEmpty()) continue;
            String reply;
            try {
                reply = "OK " + handle(line.split("\t", 4));
            } catch (Throwable t) {
                Throwable c = (t instanceof InvocationTargetException && t.getCause() != null) ? t.getCause() : t;
                reply = "ERR " + c.getClass().getSimpleName() + ": " + String.valueOf(c.getMessage()).replace('\n', ' ');
            }
            out.println(reply);
            out.flush();
        }
    }

    private static String handle(String[] p) throws Exception {
        String cls = p[1];
        short version = Short.parseShort(p[2]);
        if (p[0].equals("N")) {
            Message m = (Message) Class.forName(cls).getConstructor().newInstance();
            return hex(MessageUtil.toByteBuffer(m, version));
        }
        Class<?> converter = Class.forName(cls + "JsonConverter");
        if (p[0].equals("E")) {
            JsonNode node = MAPPER.readTree(p[3]);
            Message m = (Message) converter.getMethod("read", JsonNode.class, short.class).invoke(null, node, version);
            return hex(MessageUtil.toByteBuffer(m, version));
        } else if (p[0].equals("D")) {
            ByteBuffer buf = ByteBuffer.wrap(unhex(p[3]));
            Message m = (Message) Class.forName(cls).getConstructor(Readable.class, short.class)
                .newInstance(new ByteBufferAccessor(buf), version);
            if (buf.hasRemaining()) throw new IllegalStateException(buf.remaining() + " trailing bytes");
            JsonNode json = (JsonNode) converter.getMethod("write", Class.forName(cls), short.class).invoke(null, m, version);
            return hex(MessageUtil.toByteBuffer(m, version)) + "\t" + MAPPER.writeValueAsString(json);
        }
        throw new IllegalArgumentException("unknown mode " + p[0]);
    }

    private static String hex(ByteBuffer b) {
        StringBuilder sb = new StringBuilder();
        ByteBuffer d = b.duplicate();
        while (d.hasRemaining()) sb.append(String.format("%02x", d.get() & 0xff));
        return sb.toString();
    }

    private static byte[] unhex(String s) {
        byte[] out = new byte[s.length() / 2];
        for (int i = 0; i < out.length; i++) out[i] = (byte) Integer.parseInt(s.substring(2 * i, 2 * i + 2), 16);
        return out;
    }
}
