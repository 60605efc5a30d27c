"""Audio in and out, host-agnostic (pure Python, Pyodide and CPython alike): WAV files read and
written (wav.py), PCM conversions and chunking (pcm.py), transcripts as text, subtitles or JSON
(transcript.py). Compressed files (mp3, ogg/opus, flac, m4a, webm) are decoded by FFmpeg on the
desktop (files.py, PyAV imported only when a file is opened) and by the browser's own decoder in the page."""
