"""Images: ``read_images`` and ``Dataset.write_images``, decoded and encoded with
Pillow (extra ``shardflow[images]``)."""
