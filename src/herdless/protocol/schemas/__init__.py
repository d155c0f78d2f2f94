"""Message schemas of APIs kafka-python's codec has no classes for (codec.py loads them).

Each file states the wire layout of one API's request or response in the JSON
form Kafka's schemas use, with the fields, types and version ranges the
protocol defines and nothing else.
"""
