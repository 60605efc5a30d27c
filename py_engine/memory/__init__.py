"""On-device memory over the user's documents (issue 31): documents are read to text with their pages
and headings (documents.py, and pdf.py for PDFs)."""
