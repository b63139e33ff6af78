// Writes record batches / message sets built by Kafka's own Java code (kafka-clients 3.9.1)
// into OUT_DIR, one file per case, for tests/unit/test_records_java.py to decode.
// Deterministic: fixed timestamps, a fixed LCG for "random" bytes, no LogAppendTime.
import java.io.FileOutputStream;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;

import org.apache.kafka.common.compress.Compression;
import org.apache.kafka.common.header.Header;
import org.apache.kafka.common.header.internals.RecordHeader;
import org.apache.kafka.common.record.ControlRecordType;
import org.apache.kafka.common.record.EndTransactionMarker;
import org.apache.kafka.common.record.MemoryRecords;
import org.apache.kafka.common.record.SimpleRecord;
import org.apache.kafka.common.record.TimestampType;

public class RecordVectors {
    static String outDir;

    static void write(String name, MemoryRecords records) throws Exception {
        ByteBuffer buf = records.buffer().duplicate();
        byte[] bytes = new byte[buf.remaining()];
        buf.get(bytes);
        try (FileOutputStream out = new FileOutputStream(outDir + "/" + name + ".bin")) {
            out.write(bytes);
        }
    }

    static byte[] b(String s) { return s == null ? null : s.getBytes(StandardCharsets.UTF_8); }

    static byte[] noise(int n, long seed) {
        byte[] out = new byte[n];
        long x = seed;
        for (int i = 0; i < n; i++) {
            x = x * 6364136223846793005L + 1442695040888963407L;
            out[i] = (byte) (x >>> 56);
        }
        return out;
    }

    // 40 records: null keys/values, headers (one null-valued), one 100 KB incompressible
    // value (several snappy/lz4 blocks, stored-raw lz4 blocks) and one 100 KB repetitive one.
    static SimpleRecord[] richRecords(boolean withHeaders) {
        List<SimpleRecord> list = new ArrayList<>();
        for (int i = 0; i < 40; i++) {
            byte[] key = (i % 7 == 0) ? null : b("key-" + i);
            byte[] value;
            if (i == 5) value = noise(100_000, 42);
            else if (i == 6) value = b("abcdefgh".repeat(12_500));
            else if (i % 11 == 0) value = null;
            else value = b("value-" + i + "-" + "x".repeat(i));
            Header[] headers = (withHeaders && i % 3 == 0)
                ? new Header[] {new RecordHeader("h1", b("hv" + i)), new RecordHeader("h-null", (byte[]) null)}
                : new Header[0];
            list.add(new SimpleRecord(2000L + (i * 37L) % 101, key, value, headers));
        }
        return list.toArray(new SimpleRecord[0]);
    }

    static SimpleRecord[] smallRecords() {
        return new SimpleRecord[] {
            new SimpleRecord(1000L, b("k0"), b("v0")),
            new SimpleRecord(1003L, null, b("v1")),
            new SimpleRecord(999L, b("k2"), null),
        };
    }

    public static void main(String[] args) throws Exception {
        outDir = args[0];
        write("v2_exact_k_v_1000", MemoryRecords.withRecords(Compression.NONE, new SimpleRecord(1000L, b("k"), b("v"))));
        String[] codecs = {"none", "gzip", "snappy", "lz4", "zstd"};
        for (String codec : codecs) {
            Compression c = Compression.of(codec).build();
            write("v2_" + codec, MemoryRecords.withRecords(100L, c, richRecords(true)));
        }
        write("v2_txn_none", MemoryRecords.withTransactionalRecords(
            500L, Compression.NONE, 77L, (short) 3, 10, 6, smallRecords()));
        write("v2_idempotent_lz4", MemoryRecords.withIdempotentRecords(
            600L, Compression.lz4().build(), 78L, (short) 1, Integer.MAX_VALUE - 1, 2, smallRecords()));
        write("v2_control_abort", MemoryRecords.withEndTransactionMarker(
            42L, 3000L, 7, 1234L, (short) 5, new EndTransactionMarker(ControlRecordType.ABORT, 9)));
        write("v2_control_commit", MemoryRecords.withEndTransactionMarker(
            43L, 3001L, 7, 1234L, (short) 5, new EndTransactionMarker(ControlRecordType.COMMIT, 10)));
        String[] legacyCodecs = {"none", "gzip", "snappy", "lz4"};
        for (byte magic = 0; magic <= 1; magic++) {
            for (String codec : legacyCodecs) {
                Compression c = Compression.of(codec).build();
                write("v" + magic + "_" + codec,
                    MemoryRecords.withRecords(magic, 10L, c, TimestampType.CREATE_TIME, richRecords(false)));
                write("v" + magic + "_small_" + codec,
                    MemoryRecords.withRecords(magic, 10L, c, TimestampType.CREATE_TIME, smallRecords()));
            }
        }
    }
}
