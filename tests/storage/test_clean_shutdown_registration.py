"""KIP-966's clean-shutdown flag survives a clean shutdown that nobody handled (cluster
simulation seeds 425 and 1225): a broker starts after an unclean shutdown (it may have lost
unflushed records), no controller handles its unclean registration, and it shuts down cleanly.
The marker written then must not hide the earlier unclean start, or the next registration says
clean, the controller never takes the broker out of its ISRs and ELRs
(handleBrokerUncleanShutdown), and it can be elected cleanly without committed records."""

from __future__ import annotations

from broker.storage.log_manager import CLEAN_SHUTDOWN_FILE, LogManager
from common.names import TopicPartition as TP
from tests.storage.helpers import batch


def start(tmp_path) -> LogManager:
    lm = LogManager([str(tmp_path / "d0"), str(tmp_path / "d1")], broker_id=1, cluster_id="c1")
    lm.startup()
    return lm


def test_an_unhandled_unclean_start_still_registers_unclean_after_a_clean_shutdown(tmp_path):
    lm = start(tmp_path)  # no marker: an unclean shutdown (or a first start)
    assert not lm.had_clean_shutdown
    lm.get_or_create_log(TP("t", 0)).append_as_leader(batch(3), 0)
    lm.shutdown()  # no controller handled this incarnation's registration
    assert (tmp_path / "d0" / CLEAN_SHUTDOWN_FILE).exists()  # the logs are flushed
    lm = start(tmp_path)
    assert not lm.had_clean_shutdown  # but the registration still says unclean
    assert lm.get_log(TP("t", 0)).log_end_offset == 3
    lm.shutdown()  # again unhandled: still unclean, however many clean restarts
    lm = start(tmp_path)
    assert not lm.had_clean_shutdown
    lm.registration_handled()  # a controller request for this broker epoch arrived
    lm.shutdown()
    lm = start(tmp_path)
    assert lm.had_clean_shutdown
    lm.shutdown()  # a clean start needs no handling to stay clean
    assert start(tmp_path).had_clean_shutdown
