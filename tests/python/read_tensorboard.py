"""What TensorBoard reads from a folder of event files (train.tensorboard), as JSON.

Usage: read_tensorboard.py DIR  ->  {
  "scalars":    {tag: [[step, value], ...]}          EventAccumulator, everything kept
  "texts":      {tag: [[step, text], ...]}           the text plugin's string tensors
  "histograms": {tag: [[step, num, min, max, sum, bucket count sum], ...]}
  "raw":        {"files": N, "versions": [file_version, ...],
                 "steps": {tag: [step, ...]}}        every event of every file, in file order
}
The raw read frames the records itself and checks both CRCs of every record with
TensorBoard's own masked CRC-32C, so a record TensorBoard would drop fails here instead; and
it sees events the accumulator would purge (a step written twice), which the resume test
needs.
"""
import json
import os
import struct
import sys

from tensorboard.backend.event_processing import event_accumulator
from tensorboard.compat.proto import event_pb2
from tensorboard.compat.tensorflow_stub.pywrap_tensorflow import masked_crc32c


def records(path):
    data = open(path, "rb").read()
    pos = 0
    while pos < len(data):
        header = data[pos:pos + 8]
        (length,) = struct.unpack("<Q", header)
        (header_crc,) = struct.unpack("<I", data[pos + 8:pos + 12])
        assert header_crc == masked_crc32c(header), f"{path}: bad length CRC at {pos}"
        body = data[pos + 12:pos + 12 + length]
        (body_crc,) = struct.unpack("<I", data[pos + 12 + length:pos + 16 + length])
        assert len(body) == length and body_crc == masked_crc32c(body), f"{path}: bad data CRC at {pos}"
        yield body
        pos += 16 + length


def raw(folder):
    files = sorted(f for f in os.listdir(folder) if f.startswith("events.out.tfevents."))
    versions, steps = [], {}
    for name in files:
        for body in records(os.path.join(folder, name)):
            event = event_pb2.Event.FromString(body)
            if event.HasField("file_version"):
                versions.append(event.file_version)
            for value in event.summary.value:
                steps.setdefault(value.tag, []).append(event.step)
    return {"files": len(files), "versions": versions, "steps": steps}


def main():
    folder = sys.argv[1]
    acc = event_accumulator.EventAccumulator(
        folder,
        size_guidance={
            event_accumulator.SCALARS: 0,
            event_accumulator.TENSORS: 0,
            event_accumulator.HISTOGRAMS: 0,
        },
    )
    acc.Reload()
    tags = acc.Tags()
    out = {"scalars": {}, "texts": {}, "histograms": {}, "raw": raw(folder)}
    for tag in tags["scalars"]:
        out["scalars"][tag] = [[e.step, e.value] for e in acc.Scalars(tag)]
    for tag in tags["tensors"]:
        if acc.SummaryMetadata(tag).plugin_data.plugin_name != "text":
            continue
        out["texts"][tag] = [
            [e.step, b"".join(e.tensor_proto.string_val).decode()] for e in acc.Tensors(tag)
        ]
    for tag in tags["histograms"]:
        out["histograms"][tag] = [
            [e.step, h.num, h.min, h.max, h.sum, sum(h.bucket)]
            for e in acc.Histograms(tag)
            for h in [e.histogram_value]
        ]
    json.dump(out, sys.stdout)


if __name__ == "__main__":
    main()
