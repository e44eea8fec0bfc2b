"""Data: vocabularies, padding and masks, synthetic tasks, character-level text, labelled text corpora."""
from .batching import pad_documents, pad_sequences
from .dates import FORMATS, Dates, format_date
from .labelled import LabelledText, read_labelled_text, sentences, tokenize
from .tasks import IGNORE, SPECIALS, Addition, Copy, Reverse, Sort, Task
from .text import CharCorpus, tinyshakespeare
from .vocab import Vocabulary

TASKS = {task.name: task for task in (Copy, Reverse, Sort, Addition, Dates)}
