// Kafka 3.9.1's own checkpoint readers and writers, run against kafkasim's files
// (tests/storage/test_kafka_tools.py).
//   java StorageFormats read  <log dir> <partition dir>   prints what Kafka parses
//   java StorageFormats write <dir>                        writes Kafka's bytes for fixed entries
import java.io.File;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;

import kafka.server.checkpoints.OffsetCheckpointFile;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.Uuid;
import org.apache.kafka.storage.internals.checkpoint.CleanShutdownFileHandler;
import org.apache.kafka.storage.internals.checkpoint.LeaderEpochCheckpointFile;
import org.apache.kafka.storage.internals.checkpoint.PartitionMetadataFile;
import org.apache.kafka.storage.internals.log.EpochEntry;
import org.apache.kafka.storage.internals.log.LogDirFailureChannel;
import scala.jdk.javaapi.CollectionConverters;

public class StorageFormats {
    static final String[] OFFSET_FILES = {"recovery-point-offset-checkpoint", "log-start-offset-checkpoint",
        "replication-offset-checkpoint", "cleaner-offset-checkpoint"};

    public static void main(String[] args) throws Exception {
        LogDirFailureChannel channel = new LogDirFailureChannel(1);
        if (args[0].equals("read")) {
            File logDir = new File(args[1]);
            File partDir = new File(args[2]);
            for (String name : OFFSET_FILES) {
                File f = new File(logDir, name);
                if (!f.exists()) continue;
                Map<TopicPartition, Object> read = CollectionConverters.asJava(new OffsetCheckpointFile(f, null).read());
                TreeMap<String, Object> sorted = new TreeMap<>();
                read.forEach((tp, off) -> sorted.put(tp.topic() + " " + tp.partition(), off));
                sorted.forEach((tp, off) -> System.out.println(name + " " + tp + " " + off));
            }
            for (EpochEntry e : new LeaderEpochCheckpointFile(new File(partDir, "leader-epoch-checkpoint"), channel).read())
                System.out.println("leader-epoch-checkpoint " + e.epoch + " " + e.startOffset);
            PartitionMetadataFile meta = new PartitionMetadataFile(new File(partDir, "partition.metadata"), channel);
            if (meta.exists())
                System.out.println("partition.metadata " + meta.read().version() + " " + meta.read().topicId());
            CleanShutdownFileHandler clean = new CleanShutdownFileHandler(logDir.getPath());
            System.out.println("clean-shutdown " + clean.exists() + " " + clean.read());
        } else {
            File dir = new File(args[1]);
            Map<TopicPartition, Object> offsets = new HashMap<>();
            offsets.put(new TopicPartition("events", 3), 1234L);
            new OffsetCheckpointFile(new File(dir, "recovery-point-offset-checkpoint"), null)
                .write(scala.collection.immutable.Map$.MODULE$.from(CollectionConverters.asScala(offsets)));
            List<EpochEntry> epochs = new ArrayList<>();
            epochs.add(new EpochEntry(0, 0));
            epochs.add(new EpochEntry(5, 1000));
            new LeaderEpochCheckpointFile(new File(dir, "leader-epoch-checkpoint"), channel).write(epochs);
            PartitionMetadataFile meta = new PartitionMetadataFile(new File(dir, "partition.metadata"), channel);
            meta.record(new Uuid(0x0001020304050607L, 0x08090a0b0c0d0e0fL));
            meta.maybeFlush();
            new CleanShutdownFileHandler(dir.getPath()).write(-1L);
        }
    }
}
