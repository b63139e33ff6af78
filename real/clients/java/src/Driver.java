// kafkasim driver for the Apache Kafka Java client (protocol: ../README.md): one JSON command per
// stdin line, one JSON reply per stdout line. Only replies go to stdout (System.out is pointed at
// stderr; slf4j-simple logs to stderr).
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.*;
import org.apache.kafka.clients.consumer.*;
import org.apache.kafka.clients.producer.*;
import org.apache.kafka.common.PartitionInfo;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;

public final class Driver {
  static final ObjectMapper JSON = new ObjectMapper();
  static String bootstrap = System.getenv().getOrDefault("KAFKASIM_BOOTSTRAP", "127.0.0.1:9092");
  static String clientId = "kafkasim-driver";
  static final Map<String, KafkaProducer<String, String>> producers = new HashMap<>();
  static final Map<String, Member> consumers = new LinkedHashMap<>();

  // KAFKASIM_CLIENT_SECURITY (JSON, ../README.md): security.protocol, the SASL mechanism and its JAAS
  // login, PEM trust and key stores (`keystore`: the private key and certificate in one PEM file).
  static void secure(Properties p) {
    String raw = System.getenv("KAFKASIM_CLIENT_SECURITY");
    if (raw == null || raw.isEmpty()) return;
    try {
      JsonNode s = JSON.readTree(raw);
      if (s.hasNonNull("protocol")) p.put("security.protocol", s.get("protocol").asText());
      if (s.hasNonNull("mechanism")) {
        String m = s.get("mechanism").asText();
        String module = m.equals("PLAIN") ? "org.apache.kafka.common.security.plain.PlainLoginModule"
            : "org.apache.kafka.common.security.scram.ScramLoginModule";
        p.put("sasl.mechanism", m);
        p.put("sasl.jaas.config", module + " required username=\"" + s.path("username").asText()
            + "\" password=\"" + s.path("password").asText() + "\";");
      }
      if (s.hasNonNull("ca")) {
        p.put("ssl.truststore.type", "PEM");
        p.put("ssl.truststore.location", s.get("ca").asText());
      }
      if (s.hasNonNull("keystore")) {
        p.put("ssl.keystore.type", "PEM");
        p.put("ssl.keystore.location", s.get("keystore").asText());
      }
    } catch (Exception e) {
      throw new IllegalArgumentException("KAFKASIM_CLIENT_SECURITY: " + e.getMessage(), e);
    }
  }

  static String describe(Throwable t) {
    return t.getClass().getSimpleName() + ": " + t.getMessage();
  }

  static void note(List<String> errors, Throwable t) {
    String m = describe(t);
    if (!errors.contains(m) && errors.size() < 20) errors.add(m);
  }

  static String acks(JsonNode a) {
    String s = a.asText();
    return (s.equals("all") || s.equals("-1")) ? "all" : s;
  }

  // ---------------------------------------------------------------- produce
  static KafkaProducer<String, String> producerFor(JsonNode cmd) {
    String txnId = cmd.hasNonNull("transactional_id") ? cmd.get("transactional_id").asText() : null;
    String key = cmd.path("acks").asText("") + "|" + cmd.path("compression").asText("none") + "|" + cmd.path("idempotent").asText("")
        + "|" + txnId;
    return producers.computeIfAbsent(key, k -> {
      Properties p = new Properties();
      p.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
      secure(p);
      p.put(ProducerConfig.CLIENT_ID_CONFIG, clientId);
      p.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
      p.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
      p.put(ProducerConfig.MAX_BLOCK_MS_CONFIG, "15000");
      if (cmd.hasNonNull("acks")) p.put(ProducerConfig.ACKS_CONFIG, acks(cmd.get("acks")));
      String codec = cmd.path("compression").asText("none");
      if (!codec.equals("none")) p.put(ProducerConfig.COMPRESSION_TYPE_CONFIG, codec);
      if (cmd.hasNonNull("idempotent")) p.put(ProducerConfig.ENABLE_IDEMPOTENCE_CONFIG, String.valueOf(cmd.get("idempotent").asBoolean()));
      if (txnId != null) p.put(ProducerConfig.TRANSACTIONAL_ID_CONFIG, txnId);
      KafkaProducer<String, String> producer = new KafkaProducer<>(p);
      if (txnId != null) producer.initTransactions();
      return producer;
    });
  }

  static Map<String, Object> produce(JsonNode cmd) throws Exception {
    KafkaProducer<String, String> p = producerFor(cmd);
    boolean txn = cmd.hasNonNull("transactional_id");
    if (txn) p.beginTransaction();
    int n = cmd.get("count").asInt();
    String topic = cmd.get("topic").asText(), prefix = cmd.get("prefix").asText();
    String keyPrefix = cmd.hasNonNull("key_prefix") ? cmd.get("key_prefix").asText() : null;
    Integer partition = cmd.hasNonNull("partition") ? cmd.get("partition").asInt() : null;
    Object[][] results = new Object[n][];
    List<String> errors = Collections.synchronizedList(new ArrayList<>());
    for (int i = 0; i < n; i++) {
      final int idx = i;
      final String v = prefix + "-" + i;
      String k = keyPrefix == null ? null : keyPrefix + "-" + i;
      try {
        p.send(new ProducerRecord<>(topic, partition, k, v), (md, ex) -> {
          if (ex != null) note(errors, ex);
          else results[idx] = new Object[] {md.partition(), md.hasOffset() ? md.offset() : -1L, v};
        });
      } catch (Exception e) {
        note(errors, e);
        break;
      }
    }
    try {
      p.flush();
    } catch (Exception e) {
      note(errors, e);
    }
    List<Object> acked = new ArrayList<>();
    for (Object[] r : results) if (r != null) acked.add(Arrays.asList(r));
    Map<String, Object> reply = new LinkedHashMap<>();
    reply.put("op", "produced");
    reply.put("acked", acked);
    reply.put("errors", new ArrayList<>(errors));
    if (txn) {
      if (cmd.path("transaction").asText("commit").equals("commit") && errors.isEmpty()) {
        p.commitTransaction();
        reply.put("transaction", "committed");
      } else {
        p.abortTransaction();
        reply.put("transaction", "aborted");
      }
    }
    return reply;
  }

  // ---------------------------------------------------------------- consume
  static final class Member {
    final String topic, group;
    final KafkaConsumer<String, String> c;
    final Map<Integer, Long> returned = new TreeMap<>();
    List<Integer> assigned = new ArrayList<>();

    Member(JsonNode cmd) {
      topic = cmd.get("topic").asText();
      group = cmd.hasNonNull("group") ? cmd.get("group").asText() : null;
      Properties p = new Properties();
      p.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
      secure(p);
      p.put(ConsumerConfig.CLIENT_ID_CONFIG, clientId);
      p.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
      p.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
      p.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
      p.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, cmd.path("from").asText("earliest"));
      if (cmd.hasNonNull("isolation")) p.put(ConsumerConfig.ISOLATION_LEVEL_CONFIG, cmd.get("isolation").asText());
      if (group != null) {
        p.put(ConsumerConfig.GROUP_ID_CONFIG, group);
        p.put(ConsumerConfig.SESSION_TIMEOUT_MS_CONFIG, cmd.path("session_timeout_ms").asText("10000"));
        p.put(ConsumerConfig.HEARTBEAT_INTERVAL_MS_CONFIG, cmd.path("heartbeat_interval_ms").asText("1000"));
      }
      c = new KafkaConsumer<>(p);
      if (group == null) {
        long deadline = System.currentTimeMillis() + cmd.path("timeout_ms").asLong(10000);
        List<PartitionInfo> parts = null;
        while ((parts == null || parts.isEmpty()) && System.currentTimeMillis() < deadline) {
          parts = c.partitionsFor(topic, Duration.ofMillis(Math.max(100, deadline - System.currentTimeMillis())));
        }
        if (parts == null || parts.isEmpty()) throw new IllegalStateException("topic " + topic + " has no partitions in metadata");
        List<TopicPartition> tps = new ArrayList<>();
        for (PartitionInfo pi : parts) tps.add(new TopicPartition(topic, pi.partition()));
        tps.sort(Comparator.comparingInt(TopicPartition::partition));
        c.assign(tps);
        if (cmd.path("from").asText("earliest").equals("earliest")) c.seekToBeginning(tps);
        else c.seekToEnd(tps);
      } else {
        c.subscribe(Collections.singletonList(topic));
      }
    }

    List<Integer> assignment() {
      List<Integer> out = new ArrayList<>();
      for (TopicPartition tp : c.assignment()) if (tp.topic().equals(topic)) out.add(tp.partition());
      Collections.sort(out);
      return out;
    }

    List<Object> consume(int max, long timeoutMs) {
      List<Object> out = new ArrayList<>();
      long deadline = System.currentTimeMillis() + timeoutMs;
      while (out.size() < max && System.currentTimeMillis() < deadline) {
        long left = Math.max(1, Math.min(200, deadline - System.currentTimeMillis()));
        ConsumerRecords<String, String> recs = c.poll(Duration.ofMillis(left));
        Map<TopicPartition, Long> rewind = new HashMap<>();
        for (ConsumerRecord<String, String> r : recs) {
          TopicPartition tp = new TopicPartition(r.topic(), r.partition());
          if (out.size() >= max) {
            rewind.putIfAbsent(tp, r.offset());  // hand these back next time
            continue;
          }
          if (rewind.containsKey(tp)) continue;
          out.add(Arrays.asList(r.partition(), r.offset(), r.value()));
          returned.put(r.partition(), r.offset() + 1);
        }
        for (Map.Entry<TopicPartition, Long> e : rewind.entrySet()) c.seek(e.getKey(), e.getValue());
      }
      return out;
    }

    List<Object> commit() {
      Set<Integer> owned = new HashSet<>(assignment());
      Map<TopicPartition, OffsetAndMetadata> offsets = new LinkedHashMap<>();
      List<Object> out = new ArrayList<>();
      for (Map.Entry<Integer, Long> e : returned.entrySet()) {
        if (!owned.contains(e.getKey())) continue;
        offsets.put(new TopicPartition(topic, e.getKey()), new OffsetAndMetadata(e.getValue()));
        out.add(Arrays.asList(e.getKey(), e.getValue()));
      }
      if (!offsets.isEmpty()) c.commitSync(offsets);
      return out;
    }
  }

  static Map<String, Object> consume(JsonNode cmd) {
    String key = cmd.get("topic").asText() + "|" + cmd.path("group").asText("\u0000") + "|" + cmd.path("isolation").asText("");
    Member m = consumers.get(key);
    if (m == null) {
      m = new Member(cmd);
      consumers.put(key, m);
    }
    int max = cmd.hasNonNull("max") ? cmd.get("max").asInt() : Integer.MAX_VALUE;
    List<Object> recs = m.consume(max, cmd.path("timeout_ms").asLong(10000));
    Map<String, Object> reply = new LinkedHashMap<>();
    reply.put("op", "consumed");
    reply.put("records", recs);
    reply.put("assignment", m.assignment());
    if (cmd.path("commit").asBoolean(false) && m.group != null) reply.put("committed", m.commit());
    return reply;
  }

  static Map<String, Object> commit(JsonNode cmd) {
    List<Object> all = new ArrayList<>();
    for (Member m : consumers.values()) if (m.group != null) all.addAll(m.commit());
    Map<String, Object> reply = new LinkedHashMap<>();
    reply.put("op", "committed");
    reply.put("offsets", all);
    return reply;
  }

  // ---------------------------------------------------------------- consume-transform-produce
  // A read_committed member of `group` on `input` and a transactional producer: each polled batch is
  // copied to the same partitions of `output` and its offsets go into the same transaction
  // (sendOffsetsToTransaction with the consumer's groupMetadata(), KIP-447 fencing).
  static final class Pipeline {
    final String input, output, txnId;
    final KafkaConsumer<String, String> c;
    KafkaProducer<String, String> p;
    long transactions = 0;

    Pipeline(JsonNode cmd) {
      input = cmd.get("input").asText();
      output = cmd.get("output").asText();
      txnId = cmd.get("transactional_id").asText();
      Properties cp = new Properties();
      cp.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
      secure(cp);
      cp.put(ConsumerConfig.CLIENT_ID_CONFIG, clientId);
      cp.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
      cp.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
      cp.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
      cp.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
      cp.put(ConsumerConfig.ISOLATION_LEVEL_CONFIG, "read_committed");
      cp.put(ConsumerConfig.GROUP_ID_CONFIG, cmd.get("group").asText());
      cp.put(ConsumerConfig.MAX_POLL_RECORDS_CONFIG, cmd.path("batch").asText("50"));
      cp.put(ConsumerConfig.SESSION_TIMEOUT_MS_CONFIG, cmd.path("session_timeout_ms").asText("10000"));
      cp.put(ConsumerConfig.HEARTBEAT_INTERVAL_MS_CONFIG, cmd.path("heartbeat_interval_ms").asText("1000"));
      c = new KafkaConsumer<>(cp);
      c.subscribe(Collections.singletonList(input));
      p = newProducer();
    }

    KafkaProducer<String, String> newProducer() {
      Properties pp = new Properties();
      pp.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
      secure(pp);
      pp.put(ProducerConfig.CLIENT_ID_CONFIG, clientId);
      pp.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
      pp.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
      pp.put(ProducerConfig.MAX_BLOCK_MS_CONFIG, "15000");
      pp.put(ProducerConfig.TRANSACTIONAL_ID_CONFIG, txnId);
      KafkaProducer<String, String> producer = new KafkaProducer<>(pp);
      producer.initTransactions();
      return producer;
    }

    List<Integer> assignment() {
      List<Integer> out = new ArrayList<>();
      for (TopicPartition tp : c.assignment()) if (tp.topic().equals(input)) out.add(tp.partition());
      Collections.sort(out);
      return out;
    }

    // The input records of one transaction, and whether it committed; null when nothing was polled.
    // Every abortEvery-th transaction is aborted on purpose (then rewound): its output must never be read.
    Object[] step(long timeoutMs, List<String> errors, long abortEvery) {
      ConsumerRecords<String, String> recs = c.poll(Duration.ofMillis(Math.max(1, timeoutMs)));
      if (recs.isEmpty()) return null;
      List<Object> rows = new ArrayList<>();
      Map<TopicPartition, OffsetAndMetadata> offsets = new HashMap<>();
      for (ConsumerRecord<String, String> r : recs) {
        rows.add(Arrays.asList(r.partition(), r.offset(), r.value()));
        offsets.put(new TopicPartition(r.topic(), r.partition()), new OffsetAndMetadata(r.offset() + 1));
      }
      transactions++;
      try {
        p.beginTransaction();
        for (ConsumerRecord<String, String> r : recs) p.send(new ProducerRecord<>(output, r.partition(), null, r.value()));
        p.sendOffsetsToTransaction(offsets, c.groupMetadata());
        if (abortEvery > 0 && transactions % abortEvery == 0) {
          p.flush();  // so the aborted records are in the log (an abort drops what is unsent)
          abortAndRewind(null, errors);
          return new Object[] {rows, false};
        }
        p.commitTransaction();
        return new Object[] {rows, true};
      } catch (Exception e) {
        note(errors, e);
        abortAndRewind(e, errors);
        return new Object[] {rows, false};
      }
    }

    void abortAndRewind(Exception cause, List<String> errors) {
      if (cause instanceof org.apache.kafka.common.errors.ProducerFencedException
          || cause instanceof org.apache.kafka.common.errors.InvalidProducerEpochException) {
        p.close(Duration.ofSeconds(5));
        p = newProducer();
      } else {
        try {
          p.abortTransaction();
        } catch (Exception e) {
          note(errors, e);
          p.close(Duration.ofSeconds(5));
          p = newProducer();
        }
      }
      Set<TopicPartition> owned = c.assignment();
      Map<TopicPartition, OffsetAndMetadata> committed = c.committed(owned);
      for (TopicPartition tp : owned) {
        OffsetAndMetadata om = committed.get(tp);
        if (om != null) c.seek(tp, om.offset());
        else c.seekToBeginning(Collections.singletonList(tp));
      }
    }
  }

  static final Map<String, Pipeline> pipelines = new LinkedHashMap<>();

  static Map<String, Object> transform(JsonNode cmd) {
    String key = cmd.get("input").asText() + "|" + cmd.get("output").asText() + "|" + cmd.get("group").asText() + "|"
        + cmd.get("transactional_id").asText();
    Pipeline pl = pipelines.get(key);
    if (pl == null) {
      pl = new Pipeline(cmd);
      pipelines.put(key, pl);
    }
    long want = cmd.path("max").asLong(Long.MAX_VALUE), done = 0;
    long deadline = System.currentTimeMillis() + cmd.path("timeout_ms").asLong(10000);
    List<Object> committed = new ArrayList<>();
    List<String> errors = new ArrayList<>();
    int aborted = 0;
    while (done < want && System.currentTimeMillis() < deadline) {
      Object[] r = pl.step(Math.min(200, deadline - System.currentTimeMillis()), errors, cmd.path("abort_every").asLong(0));
      if (r == null) continue;
      if ((Boolean) r[1]) {
        committed.add(r[0]);
        done += ((List<?>) r[0]).size();
      } else {
        aborted++;
      }
    }
    Map<String, Object> reply = new LinkedHashMap<>();
    reply.put("op", "transformed");
    reply.put("transactions", committed);
    reply.put("aborted", aborted);
    reply.put("assignment", pl.assignment());
    reply.put("errors", errors);
    return reply;
  }

  static void close() {
    for (Pipeline pl : pipelines.values()) {
      pl.c.close(Duration.ofSeconds(10));
      pl.p.close(Duration.ofSeconds(10));
    }
    for (Member m : consumers.values()) m.c.close(Duration.ofSeconds(10));
    for (KafkaProducer<String, String> p : producers.values()) p.close(Duration.ofSeconds(10));
  }

  static Map<String, Object> hello() {
    Map<String, Object> r = new LinkedHashMap<>();
    r.put("op", "hello");
    r.put("client", "java");
    r.put("version", org.apache.kafka.common.utils.AppInfoParser.getVersion());
    r.put("language", "java " + System.getProperty("java.version"));
    r.put("codecs", Arrays.asList("none", "gzip", "snappy", "lz4", "zstd"));
    r.put("default_idempotent", true);
    return r;
  }

  public static void main(String[] args) throws Exception {
    for (int i = 0; i + 1 < args.length; i++) {
      if (args[i].equals("--bootstrap") || args[i].equals("-bootstrap")) bootstrap = args[i + 1];
      if (args[i].equals("--client-id")) clientId = args[i + 1];
    }
    PrintStream out = new PrintStream(new java.io.FileOutputStream(java.io.FileDescriptor.out), true, "UTF-8");
    System.setOut(System.err);
    BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
    String line;
    while ((line = in.readLine()) != null) {
      line = line.trim();
      if (line.isEmpty()) continue;
      JsonNode cmd;
      try {
        cmd = JSON.readTree(line);
        if (cmd == null || !cmd.isObject()) throw new IllegalArgumentException("a command is a JSON object");
      } catch (Exception e) {
        Map<String, Object> r = new LinkedHashMap<>();
        r.put("op", "error");
        r.put("error", "bad command line: " + describe(e));
        r.put("cmd", null);
        out.println(JSON.writeValueAsString(r));
        continue;
      }
      String op = cmd.path("op").asText("");
      Map<String, Object> reply;
      try {
        switch (op) {
          case "hello": reply = hello(); break;
          case "produce": reply = produce(cmd); break;
          case "consume": reply = consume(cmd); break;
          case "commit": reply = commit(cmd); break;
          case "transform": reply = transform(cmd); break;
          case "close":
            close();
            reply = new LinkedHashMap<>();
            reply.put("op", "closed");
            break;
          default:
            reply = new LinkedHashMap<>();
            reply.put("op", "error");
            reply.put("error", "unknown op " + JSON.writeValueAsString(cmd.get("op")));
            reply.put("cmd", op);
        }
      } catch (Throwable t) {
        t.printStackTrace();
        reply = new LinkedHashMap<>();
        reply.put("op", "error");
        reply.put("error", describe(t));
        reply.put("cmd", op);
      }
      if (cmd.has("id")) reply.put("id", cmd.get("id"));
      out.println(JSON.writeValueAsString(reply));
      if (op.equals("close")) System.exit(0);
    }
    close();
    System.exit(0);
  }
}
