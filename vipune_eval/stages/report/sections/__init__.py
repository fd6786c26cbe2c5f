"""The report's sections, built once from report.json (stages.report.report_json's ``Report``)
into a document (stages.report.document) that report.md, the HTML pages and the closing summary
render: one module per thing drawn, assembled by ``contents.document``. Every sentence and table a
person reads is made here; nothing is read or computed that stages.report.report did not put in
the report."""
