"""kafkasim.storage: Kafka's log on disk.

    Log, LogConfig                       log.py          UnifiedLog / LocalLog / LogLoader
    AppendInfo                           append_info.py  LogAppendInfo
    ProducerStateManager                 producer_state.py  idempotent producers' state, *.snapshot
    LogSegment                           segment.py      .log + .index + .timeindex + .txnindex
    TransactionIndex, AbortedTxn         txn_index.py    the aborted transactions of a segment
    OffsetIndex, TimeIndex               index.py        Kafka's 8- and 12-byte index entries
    LogManager, LogManagerConfig         log_manager.py  the log dir: load, jobs, checkpoints
    LogCleaner (Cleaner)                 cleaner.py      compaction
    OffsetCheckpointFile, ...            checkpoints.py  Kafka's checkpoint text formats
    LeaderEpochFileCache                 epoch.py        leader-epoch-checkpoint
    check_log                            verify.py       a log's data and indexes agree
"""

from kafkasim.storage.log import AppendInfo, KafkaStorageError, Log, LogConfig, OffsetOutOfRangeError
from kafkasim.storage.log_manager import LogManager, LogManagerConfig

__all__ = ["AppendInfo", "KafkaStorageError", "Log", "LogConfig", "LogManager", "LogManagerConfig",
           "OffsetOutOfRangeError"]
