from herdless.coordinator.placement import java_string_hash, kafka_abs, partition_for


def test_java_string_hash_known_values() -> None:
    assert java_string_hash("") == 0
    assert java_string_hash("a") == 97
    assert java_string_hash("hello") == 99162322
    # Java's classic collision pair.
    assert java_string_hash("FB") == java_string_hash("Ea") == 2236
    # Overflow into negative int32.
    assert java_string_hash("hello world, this is a group") < 0


def test_java_string_hash_counts_utf16_code_units() -> None:
    # U+1F600 is the surrogate pair D83D DE00 in Java's String.
    assert java_string_hash("\U0001f600") == 0xD83D * 31 + 0xDE00
    assert java_string_hash("é") == 0xE9


def test_integer_min_value_maps_to_partition_zero() -> None:
    # "polygenelubricants".hashCode() == Integer.MIN_VALUE; Math.abs would keep it
    # negative, Kafka's Utils.abs makes it 0.
    assert java_string_hash("polygenelubricants") == -(2**31)
    assert kafka_abs(-(2**31)) == 0
    assert partition_for("polygenelubricants", 50) == 0


def test_partition_for_matches_kafka() -> None:
    assert partition_for("hello", 50) == 99162322 % 50
    h = java_string_hash("hello world, this is a group")
    assert partition_for("hello world, this is a group", 50) == (-h) % 50
    assert all(0 <= partition_for(f"group-{i}", 7) < 7 for i in range(200))
